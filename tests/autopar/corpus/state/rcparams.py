import matplotlib

matplotlib.rcParams["lines.linewidth"] = 3.5
matplotlib.rcParams.update({"font.size": 7.0})
a = matplotlib.rcParams["lines.linewidth"]
b = matplotlib.rcParams["font.size"]
print(a, b)
