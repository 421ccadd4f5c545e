"""A script that plots and saves figures with matplotlib's Agg backend."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

x = np.linspace(0, 2 * np.pi, 400)
y = np.sin(x) ** 2
z = np.cos(3 * x)
plt.figure(figsize=(4, 3))
plt.plot(x, y, label="sin^2")
plt.legend()
plt.savefig("first.png", metadata={"Software": None})
plt.close()
fig, ax = plt.subplots(figsize=(4, 3))
ax.plot(x, z, color="red")
ax.set_title("cos 3x")
fig.savefig("second.png", metadata={"Software": None})
plt.close(fig)
print("area", round(float(np.trapz(y, x)), 6) if hasattr(np, "trapz") else None)
print("figures saved")
