import atexit

a = sum(range(100))
b = sum(range(200))
atexit.register(lambda: print("bye", a, b))
print("main")
