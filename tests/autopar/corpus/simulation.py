"""A simulation with random numbers: global generators and generator objects."""
import random

import numpy as np

random.seed(42)
np.random.seed(7)
rng = np.random.default_rng(2024)
other = np.random.default_rng(99)


def walk(steps, gen):
    pos = 0
    path = []
    for _ in range(steps):
        pos += 1 if gen.random() < 0.5 else -1
        path.append(pos)
    return path


walk_a = walk(2000, random)
walk_b = walk(2000, random)
draws = np.random.rand(5)
normal = rng.normal(size=1000)
uniform = other.uniform(size=1000)
more = rng.normal(size=3)
deck = list(range(20))
random.shuffle(deck)
print("walks end at", walk_a[-1], walk_b[-1])
print("draws", np.round(draws, 6))
print("normal mean", round(float(normal.mean()), 6), "uniform max", round(float(uniform.max()), 6))
print("more", np.round(more, 6))
print("deck", deck[:8])
with open("sim.txt", "w") as f:
    f.write(" ".join(str(v) for v in walk_a[::100]) + "\n")
