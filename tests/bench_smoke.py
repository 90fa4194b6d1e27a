"""gradkern bench --quick --op rmsnorm --json exits 0 and prints JSON rows
with the benchmark's fields (a smoke test: no timing is asserted)."""
import json
import subprocess
import sys

out = subprocess.run([sys.argv[1], "bench", "--quick", "--op", "rmsnorm", "--json"],
                     check=True, stdout=subprocess.PIPE, text=True).stdout
rows = json.loads(out)
assert rows, "no rows"
fields = ("op", "direction", "dtype", "shape", "gradkern_ms", "gb_s", "gflop_s",
          "limit_name", "limit_value", "fraction_of_limit")
for r in rows:
    missing = [f for f in fields if f not in r]
    assert not missing, "row %r lacks %s" % (r, missing)
    assert r["op"] == "rmsnorm", r
    assert r["gradkern_ms"] > 0 and r["gb_s"] > 0, r
assert {r["direction"] for r in rows} == {"forward", "backward"}, rows
print("bench smoke: %d rows" % len(rows))
