"""An exception in the middle."""
a = sum(range(100))
print("before", a)
b = a // 0
print("never")
with open("after.txt", "w") as f:
    f.write("should not exist\n")
