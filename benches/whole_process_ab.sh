#!/usr/bin/env bash
# A/B of the whole-process rows: the two binaries alternately (A, B, A, B, ...), RUNS runs each,
# the bench's inputs; prints the median user+sys CPU seconds per row and binary.
#   bash benches/whole_process_ab.sh OLD_BIN NEW_BIN [RUNS]
# (the inputs are the ones benches/whole_process.sh generates into target/bench-input/; run it once first)
set -euo pipefail
old=$1; new=$2; runs=${3:-7}
input="$(cd "$(dirname "$0")/.." && pwd)/target/bench-input"
[[ -s $input/set_volume.jsonl ]] || { echo "no inputs in $input: run bash benches/whole_process.sh first" >&2; exit 2; }
measure() { local TIMEFORMAT='%3U %3S'; { time "$@" >/dev/null 2>/dev/null; } 2>&1 | awk '{ print $1 + $2 }'; }
median() { sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
printf '%-20s %10s %10s %8s %12s %12s\n' row "old cpu s" "new cpu s" "old/new" "old req/s" "new req/s"
for row in set_volume get_device_status tools_list; do
    f=$input/$row.jsonl
    : >/tmp/ab.$row.old; : >/tmp/ab.$row.new
    for _ in $(seq "$runs"); do
        measure "$old" replay --board bread-compact-wifi --replies-only "$f" >>/tmp/ab.$row.old
        measure "$new" replay --board bread-compact-wifi --replies-only "$f" >>/tmp/ab.$row.new
    done
    o=$(median </tmp/ab.$row.old); n=$(median </tmp/ab.$row.new)
    awk -v r=$row -v o=$o -v n=$n 'BEGIN { printf "%-20s %10.3f %10.3f %7.2fx %12.0f %12.0f\n", r, o, n, o / n, 200000 / o, 200000 / n }'
done
