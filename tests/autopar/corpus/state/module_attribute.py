import json

json.flag = "set"
def flag():
    return json.flag
a = flag()
b = getattr(json, "flag", "missing")
c = flag() + "!"
print(a, b, c)
