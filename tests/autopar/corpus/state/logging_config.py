import logging

logging.basicConfig(level=logging.INFO, format="%(levelname)s:%(message)s")
a = sum(range(1000))
b = sum(range(2000))
logging.info("a is %d", a)
logging.warning("b is %d", b)
print(a + b)
