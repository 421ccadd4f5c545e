"""A neural network with one hidden layer (sigmoid) and a ReLU output, trained on random
data with the squared loss by full-batch gradient descent for 10 epochs.

    python examples/neural_network.py --n 50000
"""

import math

import tilegraph as tg
from tilegraph.workloads import neural_network, run_example


def build(n: int, block: int) -> tuple[tg.Array, ...]:
    d, h, o = max(1, min(500, n // 20)), max(1, min(256, n // 40)), 10
    X = tg.random.random((n, d), chunks=(block, -1), seed=0)
    Y = tg.random.random((n, o), chunks=(block, -1), seed=1)
    W1 = (tg.random.random((d, h), chunks=-1, seed=2) - 0.5) / math.sqrt(d)
    W2 = (tg.random.random((h, o), chunks=-1, seed=3) - 0.5) / math.sqrt(h)
    b1, b2 = tg.zeros(h, chunks=-1), tg.zeros(o, chunks=-1)
    return neural_network(X, Y, W1, b1, W2, b2, epochs=10)  # trained W1, b1, W2, b2


if __name__ == "__main__":
    raise SystemExit(run_example("neural_network", build))
