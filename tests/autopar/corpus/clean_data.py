"""Data cleaning with files: write raw records, clean them, write the results."""
import csv
import json
import os

RAW = "raw.csv"
rows = [("id", "city", "temp")]
for i in range(200):
    city = ["Oslo", "Lima", " lima", "OSLO ", "Pune", ""][i % 6]
    temp = "" if i % 7 == 0 else str((i * 37) % 41 - 5)
    rows.append((str(i), city, temp))
with open(RAW, "w", newline="") as f:
    csv.writer(f).writerows(rows)
print("raw rows:", len(rows) - 1)

with open(RAW, newline="") as f:
    records = list(csv.DictReader(f))
cities = sorted({r["city"].strip().title() for r in records if r["city"].strip()})
print("cities:", ", ".join(cities))


def clean(record):
    city = record["city"].strip().title()
    if not city or not record["temp"]:
        return None
    return {"id": int(record["id"]), "city": city, "temp": float(record["temp"])}


cleaned = [c for c in (clean(r) for r in records) if c is not None]
dropped = len(records) - len(cleaned)
by_city = {}
for c in cleaned:
    by_city.setdefault(c["city"], []).append(c["temp"])
means = {k: round(sum(v) / len(v), 3) for k, v in sorted(by_city.items())}
os.makedirs("out", exist_ok=True)
with open(os.path.join("out", "clean.csv"), "w", newline="") as f:
    w = csv.DictWriter(f, fieldnames=["id", "city", "temp"])
    w.writeheader()
    w.writerows(cleaned)
with open("out/means.json", "w") as f:
    json.dump(means, f, indent=1, sort_keys=True)
print("dropped:", dropped)
for city, m in means.items():
    print(f"{city:>6}: {m:7.3f}")
with open("out/means.json") as f:
    print("saved", len(json.load(f)), "means")
