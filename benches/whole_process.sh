#!/usr/bin/env bash
# The whole-process speed targets (issue 7; BENCHMARKS.md), measured on the release binary.
#
#   bash benches/whole_process.sh [RUNS]        (default 7 runs per row; the median is reported)
#
# Rows:
#   set_volume, get_device_status, tools_list — a 200,000-line request file each (generated into
#     target/bench-input/), through `xiaozhi-twin replay --board bread-compact-wifi --replies-only
#     FILE > /dev/null`; the figure is requests per second of user+sys CPU time of the process.
#   replay_conformance — the 64-line public conformance file, default (traced) output, wall time.
#
# Needs only bash, awk and cargo. Timing uses bash's `time` keyword (user, sys and real of the
# child process, millisecond resolution).
set -euo pipefail

runs=${1:-7}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

cargo build --release --locked --quiet
bin="$root/target/release/xiaozhi-twin"
board=bread-compact-wifi
lines=200000
input="$root/target/bench-input"
mkdir -p "$input"

# One request per line; ids 1..N; volumes 0..100 cycling (always valid).
gen() {
    local name=$1
    local file="$input/$name.jsonl"
    [[ -s $file ]] && return
    case $name in
        set_volume)
            awk -v n=$lines 'BEGIN { for (i = 1; i <= n; i++) printf "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":\"self.audio_speaker.set_volume\",\"arguments\":{\"volume\":%d}}}\n", i, (i - 1) % 101 }' >"$file.tmp" ;;
        get_device_status)
            awk -v n=$lines 'BEGIN { for (i = 1; i <= n; i++) printf "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/call\",\"params\":{\"name\":\"self.get_device_status\",\"arguments\":{}}}\n", i }' >"$file.tmp" ;;
        tools_list)
            awk -v n=$lines 'BEGIN { for (i = 1; i <= n; i++) printf "{\"jsonrpc\":\"2.0\",\"id\":%d,\"method\":\"tools/list\"}\n", i }' >"$file.tmp" ;;
    esac
    mv "$file.tmp" "$file"
}

# Prints "user sys real" (seconds) of one run of the command given.
measure() {
    local TIMEFORMAT='%3U %3S %3R'
    { time "$@" >/dev/null 2>/dev/null; } 2>&1
}

median() {
    sort -g | awk '{ v[NR] = $1 } END { if (NR % 2) print v[(NR + 1) / 2]; else printf "%.4f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"
echo "binary:  $bin ($runs runs per row, median)"
printf '%-20s %12s %14s %12s %8s\n' row "cpu s" "requests/s" target ratio

for row in set_volume:1400000 get_device_status:1000000 tools_list:250000; do
    name=${row%%:*}
    target=${row##*:}
    gen "$name"
    file="$input/$name.jsonl"
    # Every request is answered exactly once (a refused file would make the figure meaningless).
    replies=$("$bin" replay --board $board --replies-only "$file" | wc -l)
    [[ $replies -eq $lines ]] || { echo "$name: $replies replies to $lines requests" >&2; exit 1; }
    cpu=$(for _ in $(seq "$runs"); do
        measure "$bin" replay --board $board --replies-only "$file" | awk '{ print $1 + $2 }'
    done | median)
    awk -v n=$lines -v s="$cpu" -v t="$target" -v name="$name" \
        'BEGIN { r = n / s; printf "%-20s %12.3f %14.0f %12d %7.2fx\n", name, s, r, t, r / t }'
done

conformance="$root/tests/conformance/$board.requests.jsonl"
wall=$(for _ in $(seq "$runs"); do
    measure "$bin" replay --board $board "$conformance" | awk '{ print $3 }'
done | median)
awk -v s="$wall" 'BEGIN { printf "%-20s %12s %14s %12s %7.2fx   (wall %.1f ms, target < 20 ms)\n", "replay_conformance", "-", "-", "-", 0.020 / (s > 0 ? s : 0.0005), s * 1000 }'
