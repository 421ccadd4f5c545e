"""A NumPy analysis: independent statistics of two data sets, saved and printed."""
import numpy as np

x = np.linspace(0.0, 10.0, 20001)
signal = np.sin(x) * np.exp(-x / 5)
noise = np.cos(3 * x) * 0.1
mixed = signal + noise
spectrum = np.abs(np.fft.rfft(mixed))
peak = int(np.argmax(spectrum[1:]) + 1)
stats = {"mean": float(mixed.mean()), "std": float(mixed.std()), "peak": peak}
grid = np.outer(np.arange(300.0), np.arange(300.0)) % 17
eig = np.linalg.eigvalsh(grid + grid.T)
cum = np.cumsum(signal)
np.save("spectrum.npy", spectrum)
np.savetxt("eig.txt", eig[-5:], fmt="%.6f")
print("stats:", {k: round(v, 6) for k, v in stats.items()})
print("largest eigenvalues:", np.round(eig[-3:], 4))
signal *= 2
print("scaled max:", round(float(signal.max()), 6), "cum end:", round(float(cum[-1]), 6))
print("spectrum saved:", np.load("spectrum.npy").shape)
