import sys

sys.setrecursionlimit(5000)
def depth(n):
    return 0 if n == 0 else 1 + depth(n - 1)
a = depth(3000)
b = depth(2500)
print(a, b)
