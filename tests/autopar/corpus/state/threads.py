import threading

results = []
def work():
    results.append(sum(range(10000)))
t = threading.Thread(target=work)
t.start()
other = sum(range(100))
t.join()
print(results, other)
