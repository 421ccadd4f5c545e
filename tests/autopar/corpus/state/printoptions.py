import numpy as np

np.set_printoptions(suppress=True, precision=2)
a = np.array([2e-10, 3.0, 1 / 3])
b = np.linspace(0, 1, 7) ** 3
print(a)
print(b)
