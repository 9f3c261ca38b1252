#!/bin/sh
# SPDX-License-Identifier: MIT
# Measure `ringfeed pack` against `cp` of the same bytes (run on demand, not
# in CI): a SIZE_MIB .npy of uint8 values [N, 4096] is packed raw and copied,
# each after dropping the page cache when allowed (root), else warm; then
# packed with --zstd 3 -j 2 under /usr/bin/time -v to show the CPU used
# (user + sys over wall: ~2 means both cores busy).  Files are removed at the end.
#
# usage: tools/bench-pack.sh PATH/TO/ringfeed [DIR] [SIZE_MIB]
set -eu

RF=${1:?usage: $0 PATH/TO/ringfeed [DIR] [SIZE_MIB]}
DIR=${2:-${TMPDIR:-/tmp}}
SIZE_MIB=${3:-2048}
PY=/usr/bin/python3
WORK=$(mktemp -d "$DIR/rf-bench-pack.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM

echo "ringfeed $("$RF" --version | cut -d' ' -f2), $(nproc) cores, $SIZE_MIB MiB, in $WORK"

# Text-like bytes: compressible, not trivially.
"$PY" - "$WORK/in.npy" "$SIZE_MIB" <<'PYEOF'
import sys
import numpy as np
path, mib = sys.argv[1], int(sys.argv[2])
rows = mib * 256  # 4 KiB per row
a = np.lib.format.open_memmap(path, mode="w+", dtype="u1", shape=(rows, 4096))
rng = np.random.default_rng(0)
block = rng.integers(32, 100, size=(4096, 4096), dtype="u1")
block[:, ::3] = 32
for i in range(0, rows, 4096):
    n = min(4096, rows - i)
    a[i:i + n] = np.roll(block, i % 4093, axis=1)[:n]
a.flush()
del a
PYEOF
sync

drop_caches() {
	if sync && echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
		echo "cold"
	else
		# Warm the cache instead, so both runs start alike.
		cat "$WORK/in.npy" > /dev/null
		echo "warm"
	fi
}

now() { date +%s.%N; }

run_timed() { # label, command...
	label=$1
	shift
	state=$(drop_caches)
	t0=$(now)
	"$@"
	sync
	t1=$(now)
	secs=$(echo "$t1 $t0" | awk '{printf "%.3f", $1 - $2}')
	rate=$(echo "$SIZE_MIB $secs" | awk '{printf "%.0f", $1 / $2}')
	echo "$label ($state cache, incl. sync): $secs s, $rate MiB/s"
	eval "secs_$(echo "$label" | tr -c 'a-z0-9\n' '_')=$secs"
}

run_timed cp cp "$WORK/in.npy" "$WORK/copy.npy"
rm -f "$WORK/copy.npy"
run_timed pack "$RF" pack -q -o "$WORK/raw.rfs" "data=$WORK/in.npy"
rm -f "$WORK/raw.rfs"
run_timed cp cp "$WORK/in.npy" "$WORK/copy.npy"
rm -f "$WORK/copy.npy"
run_timed pack "$RF" pack -q -o "$WORK/raw.rfs" "data=$WORK/in.npy"
rm -f "$WORK/raw.rfs"
echo "pack / cp speed (second runs): $(echo "$secs_cp $secs_pack" | awk '{printf "%.0f%%", 100 * $1 / $2}')"

echo "--zstd 3 -j 2:"
drop_caches > /dev/null
/usr/bin/time -v "$RF" pack -q --zstd 3 -j 2 -o "$WORK/z.rfs" "data=$WORK/in.npy" 2> "$WORK/time.txt"
grep -E "User time|System time|Elapsed|Percent of CPU|Maximum resident" "$WORK/time.txt"
awk -F': ' '/User time/ {u = $2} /System time/ {s = $2}
	/Elapsed/ {n = split($2, p, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + p[i]}
	END {printf "cores busy (user+sys)/wall: %.2f\n", (u + s) / w}' "$WORK/time.txt"
"$RF" info "$WORK/z.rfs" | grep -E "ratio|stored bytes"
