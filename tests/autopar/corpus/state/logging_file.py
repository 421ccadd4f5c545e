import logging
import math

logging.basicConfig(filename="run.log", filemode="w", level=logging.INFO,
                    format="%(levelname)s %(message)s", encoding="utf-8")


def work(n):
    return sum(math.sin(i) for i in range(n))


a = work(300_000)
logging.info("a is %.6f, the slow one (café)", a)
b = work(1_000)
logging.warning("b is %.6f", b)
c = work(2_000)
logging.info("c is %.6f", c)
with open("run.log", encoding="utf-8") as f:
    lines = f.read().splitlines()
print(len(lines), lines[-1])
print(round(a + b + c, 6))
