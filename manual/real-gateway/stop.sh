#!/usr/bin/env bash
# Stops the gateway start.sh started.
#
#   manual/real-gateway/stop.sh [DIR]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DIR=$(realpath -m "${1:-${REAL_GATEWAY_DIR:-$REPO/target/real-gateway}}")
if [ -f "$DIR/gateway.pid" ]; then
    kill -- -"$(cat "$DIR/gateway.pid")" 2>/dev/null || kill "$(cat "$DIR/gateway.pid")" 2>/dev/null || true
    rm -f "$DIR/gateway.pid"
    echo "stopped the gateway"
fi
