import decimal

decimal.getcontext().prec = 6
a = decimal.Decimal(1) / decimal.Decimal(7)
b = decimal.Decimal(2).sqrt()
print(a, b)
