"""A function that reads a global that is later reassigned."""
scale = 2
offset = 1


def f(v):
    return v * scale + offset


def g(v):
    return f(v) - offset


first = [f(i) for i in range(5)]
second = g(10)
scale = 100
third = f(1)
offset = -1
fourth = g(2)
log = []
log.append(first)
log.append(third)
print(first, second, third, fourth)
print(log)
