import numpy as np

np.seterr(all="raise")
x = np.array([1.0, 2.0])
y = np.array([0.0, 1.0])
try:
    print(x / y)
except FloatingPointError as exc:
    print("caught:", exc)
try:
    print(np.log(y))
except FloatingPointError as exc:
    print("caught:", exc)
