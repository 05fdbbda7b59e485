#!/usr/bin/env bash
# Stops what start.sh started (by the process ids it wrote; each runs in its own session).
#
#   manual/real-server/stop.sh [DIR]
set -uo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DIR=$(realpath -m "${1:-${REAL_SERVER_DIR:-$REPO/target/real-server}}")
for p in server standin; do
    f=$DIR/$p.pid
    [ -f "$f" ] || continue
    pid=$(cat "$f")
    if kill -0 "$pid" 2>/dev/null; then
        kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid"
        for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -0 "$pid" 2>/dev/null && kill -KILL -- "-$pid" 2>/dev/null
        echo "stop: $p (pid $pid) stopped"
    fi
    rm -f "$f"
done
