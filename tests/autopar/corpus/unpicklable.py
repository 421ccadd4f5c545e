"""Values that cannot be pickled: an open file, a generator, a lambda."""
import itertools

out = open("lines.txt", "w")
gen = (i * i for i in range(10))
square = lambda v: v * v
counter = itertools.count(5)
a = sum(range(10000))
b = sum(range(20000))
out.write(f"{a}\n")
first = [next(gen) for _ in range(3)]
out.write(f"{b}\n")
print(first, square(a), next(counter))
out.close()
print(open("lines.txt").read().split())
