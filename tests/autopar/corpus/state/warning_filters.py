import warnings

warnings.filterwarnings("error", category=DeprecationWarning)
warnings.simplefilter("ignore", UserWarning)
def old():
    warnings.warn("old is deprecated", DeprecationWarning, stacklevel=2)
    return 1
def noisy():
    warnings.warn("ignored", UserWarning, stacklevel=2)
    return 2
try:
    a = old()
except DeprecationWarning as exc:
    a = f"raised: {exc}"
b = noisy()
print(a, b)
