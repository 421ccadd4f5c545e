import os
import time

os.environ["TZ"] = "Asia/Kolkata"
time.tzset()
a = time.strftime("%H:%M %Z", time.localtime(0))
b = time.timezone
print(a, b)
