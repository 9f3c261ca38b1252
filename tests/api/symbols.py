# SPDX-License-Identifier: MIT
# Description: the shared library exports exactly the functions the public
# headers declare with RF_API: nothing internal leaks, nothing declared is
# missing.
import re
import subprocess
import sys

lib = sys.argv[1]
headers = sys.argv[2:]

declared = set()
for h in headers:
    text = open(h).read()
    # RF_API <type> <name>(...): the name is the identifier before '('.
    for m in re.finditer(r"RF_API\b([^;{]*?)\b(rf_[A-Za-z0-9_]+)\s*\(", text):
        declared.add(m.group(2))

out = subprocess.run(["nm", "-D", "--defined-only", lib], capture_output=True, text=True,
                     check=True).stdout
exported = set()
for line in out.splitlines():
    parts = line.split()
    if len(parts) >= 3 and parts[1] in ("T", "W", "D", "B", "R"):
        exported.add(parts[2].split("@")[0])
exported = {s for s in exported if not s.startswith("_")}

leaked = sorted(exported - declared)
missing = sorted(declared - exported)
for s in leaked:
    print(f"exported but not declared RF_API in a public header: {s}")
for s in missing:
    print(f"declared RF_API but not exported: {s}")
if not declared:
    print("no RF_API declarations found")
    sys.exit(1)
print(f"{len(declared)} public functions, {len(exported)} exported symbols")
sys.exit(1 if leaked or missing else 0)
