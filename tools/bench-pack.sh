#!/bin/sh
# SPDX-License-Identifier: MIT
# Measure `ringfeed pack` against `cp` of the same bytes (run on demand, not
# in CI).  A SIZE_MIB .npy of text-like uint8 rows [N, 4096] is made, then for
# ROUNDS rounds, alternately: cp, and pack raw (--zstd 0); each starts from a
# dropped page cache when allowed (root), else a warm one, and is timed to
# exit and to exit plus `sync` (the writer fsyncs its shard; cp does not).
# The best round of each is compared.  Then --zstd 3 with -j 1 and -j 2 under
# /usr/bin/time: (user + sys) / wall near 2 means both cores were busy.  The
# load average is printed: on a shared machine, wall times mean little.
# Files are removed at the end.
#
# usage: tools/bench-pack.sh PATH/TO/ringfeed [DIR] [SIZE_MIB] [ROUNDS]
set -eu

RF=${1:?usage: $0 PATH/TO/ringfeed [DIR] [SIZE_MIB] [ROUNDS]}
DIR=${2:-${TMPDIR:-/tmp}}
SIZE_MIB=${3:-2048}
ROUNDS=${4:-3}
PY=/usr/bin/python3
WORK=$(mktemp -d "$DIR/rf-bench-pack.XXXXXX")
trap 'rm -rf "$WORK"' EXIT INT TERM

echo "ringfeed $("$RF" --version), $(nproc) cores, $SIZE_MIB MiB, $ROUNDS rounds, in $WORK"

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

cache=warm
prepare() {
	sync
	if echo 3 > /proc/sys/vm/drop_caches 2>/dev/null; then
		cache=cold
	else
		cat "$WORK/in.npy" > /dev/null
		cache=warm
	fi
}

now() { date +%s.%N; }

# timed LABEL CMD...: prints "LABEL exit_s exit+sync_s cpu_s"
timed() {
	label=$1
	shift
	prepare
	t0=$(now)
	/usr/bin/time -f "%U %S" -o "$WORK/cpu.txt" "$@"
	t1=$(now)
	sync
	t2=$(now)
	cpu=$(awk '{printf "%.2f", $1 + $2}' "$WORK/cpu.txt")
	echo "$label $(echo "$t0 $t1 $t2" | awk '{printf "%.3f %.3f", $2 - $1, $3 - $1}') $cpu" \
		>> "$WORK/runs.txt"
	echo "  $label ($cache cache, load $(cut -d' ' -f1 /proc/loadavg)):" \
		"$(tail -n1 "$WORK/runs.txt" | awk '{printf "%s s to exit, %s s with sync, %s s CPU", $2, $3, $4}')"
}

: > "$WORK/runs.txt"
i=0
while [ "$i" -lt "$ROUNDS" ]; do
	timed cp cp "$WORK/in.npy" "$WORK/copy.npy"
	rm -f "$WORK/copy.npy"
	timed pack "$RF" pack -q -o "$WORK/raw.rfs" "data=$WORK/in.npy"
	rm -f "$WORK/raw.rfs"
	i=$((i + 1))
done
awk -v mib="$SIZE_MIB" '
	{ if (!($1 in e) || $2 < e[$1]) e[$1] = $2; if (!($1 in s) || $3 < s[$1]) s[$1] = $3
	  if (!($1 in c) || $4 < c[$1]) c[$1] = $4 }
	END {
		for (k in e) printf "best %-4s: %.3f s to exit (%.0f MiB/s), %.3f s with sync (%.0f MiB/s), %.2f s CPU\n",
			k, e[k], mib / e[k], s[k], mib / s[k], c[k]
		printf "pack speed / cp speed: %.0f%% to exit, %.0f%% with sync\n",
			100 * e["cp"] / e["pack"], 100 * s["cp"] / s["pack"]
	}' "$WORK/runs.txt"

# Per-thread CPU seconds of a running process, sampled until it exits: shows
# how the work spreads over the writer's threads even on a loaded machine,
# where (user + sys) / wall says more about the neighbours than about us.
thread_cpu() { # PID OUT
	tck=$(getconf CLK_TCK)
	while kill -0 "$1" 2>/dev/null; do
		snap=""
		for t in /proc/"$1"/task/*; do
			[ -r "$t/stat" ] || continue
			snap="$snap$(awk -v t="${t##*/}" -v tck="$tck" '{
				sub(/^.*\) /, "")  # drop "pid (comm) "
				printf "thread %s: %.2f s CPU\n", t, ($12 + $13) / tck }' "$t/stat" 2>/dev/null)
"
		done
		[ -n "$snap" ] && printf "%s" "$snap" > "$2"
		sleep 0.2
	done
}

for j in 1 2; do
	prepare
	/usr/bin/time -v "$RF" pack -q --zstd 3 -j "$j" -o "$WORK/z.rfs" "data=$WORK/in.npy" \
		2> "$WORK/time.txt" &
	sleep 0.1
	pid=$(pgrep -n -f "pack -q --zstd 3 -j $j -o $WORK/z.rfs" | head -n1)
	: > "$WORK/threads.txt"
	[ -n "$pid" ] && thread_cpu "$pid" "$WORK/threads.txt"
	wait
	awk -F': ' -v j="$j" -v load="$(cut -d' ' -f1 /proc/loadavg)" '
		/User time/ {u = $2} /System time/ {s = $2}
		/Maximum resident/ {m = $2}
		/Elapsed/ {n = split($2, p, ":"); w = 0; for (i = 1; i <= n; i++) w = w * 60 + p[i]}
		END {printf "--zstd 3 -j %d: %.2f s wall, %.2f s user, %.2f s sys, (user+sys)/wall %.2f, max RSS %d MiB, load %s\n",
			j, w, u, s, (u + s) / w, m / 1024, load}' "$WORK/time.txt"
	sed 's/^/    /' "$WORK/threads.txt"
	[ "$j" = 2 ] && "$RF" info "$WORK/z.rfs" | grep -E "ratio"
	rm -f "$WORK/z.rfs"
done
