#!/usr/bin/env bash
# The console against the real xiaozhi-esp32-server: a manual check (docs/console.md, "Against
# the real server"). Needs manual/real-server set up in DIR (its setup.sh) and chromium.
#
#   manual/console-real-server/run.sh [DIR] [OUT]
#
# Starts the server with the honest stand-in LLM, the console dialling it, clicks BOOT and says
# audits/clips/zh-lower-1.wav ("把声音调小一点") through the console's HTTP API, twice, then saves
# a screenshot of the page (chromium headless), the console's state (JSON) and its log in OUT.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DIR=$(realpath -m "${1:-${REAL_SERVER_DIR:-$REPO/target/real-server}}")
OUT=$(realpath -m "${2:-$REPO/target/console-real-server}")
TWIN=${TWIN:-$REPO/target/release/xiaozhi-twin}
PORT=${CONSOLE_PORT:-8089}
mkdir -p "$OUT"
STANDIN_LLM=${STANDIN_LLM:-honest} bash "$REPO/manual/real-server/start.sh" "$DIR"
cleanup() {
    [ -n "${CONSOLE:-}" ] && kill "$CONSOLE" 2>/dev/null || true
    bash "$REPO/manual/real-server/stop.sh" "$DIR" || true
}
trap cleanup EXIT
"$TWIN" console --url ws://127.0.0.1:8000/xiaozhi/v1/ --listen "127.0.0.1:$PORT" --duration 300s \
    2>"$OUT/console.log" &
CONSOLE=$!
api="http://127.0.0.1:$PORT/api"
for _ in $(seq 50); do curl -sf "$api/state" >/dev/null && break; sleep 0.2; done
state() { curl -s "$api/state" | python3 -c "import json,sys; print(json.load(sys.stdin)['status'].get('state'))"; }
wait_state() { # state seconds
    for _ in $(seq $(($2 * 5))); do [ "$(state)" = "$1" ] && return 0; sleep 0.2; done
    echo "run: never $1 (now $(state))" >&2; return 1
}
wait_state idle 20
curl -sf -X POST "$api/button/boot?action=click" >/dev/null
wait_state listening 20
for turn in 1 2; do
    curl -sf --data-binary @"$REPO/audits/clips/zh-lower-1.wav" "$api/say" >/dev/null
    sleep 2
    wait_state speaking 30 || true
    wait_state listening 60
done
curl -s "$api/state" >"$OUT/state.json"
chromium --headless=new --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1100 \
    --virtual-time-budget=5000 --screenshot="$OUT/console.png" "http://127.0.0.1:$PORT/" 2>/dev/null
python3 - "$OUT/state.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for c in s["calls"]:
    if c.get("tool"):
        print(f'{c["at_ms"]/1000:7.2f} s  {c["tool"]} {json.dumps(c.get("arguments"), ensure_ascii=False)} -> {c.get("text")!r}{" isError" if c.get("is_error") else ""}')
for h in s["heard"]:
    what = "whole reply" if h["sentence"] is None else h["text"]
    lvl = "silence" if h["spl_db"] is None else f'{h["spl_db"]:.1f} dB SPL'
    print(f'{h["from_ms"]/1000:7.2f} s  reply {h["session"]}: {what}: {lvl} ({h["verdict"]})')
PY
echo "screenshot: $OUT/console.png"
