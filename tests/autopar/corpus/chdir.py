"""A script that changes directory and uses relative paths."""
import os

os.makedirs("work/sub", exist_ok=True)
with open("top.txt", "w") as f:
    f.write("top\n")
os.chdir("work")
with open("inner.txt", "w") as f:
    f.write("inner\n")
total = sum(range(1000))
os.chdir("sub")
with open("deep.txt", "w") as f:
    f.write(f"{total}\n")
os.environ["AUTOPAR_TEST_VALUE"] = "42"
here = os.path.basename(os.getcwd())
os.chdir(os.path.join("..", ".."))
print("back in", os.path.basename(os.getcwd()) == os.path.basename(os.getcwd()), here)
print(open("work/inner.txt").read().strip(), open("work/sub/deep.txt").read().strip())
print("env", os.environ.get("AUTOPAR_TEST_VALUE"))
