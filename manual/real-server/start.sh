#!/usr/bin/env bash
# Starts the stand-in and the real xiaozhi-esp32-server set up by setup.sh; waits for the
# WebSocket port and prints the URL. Logs: DIR/logs/{standin,server}.log.
#
#   manual/real-server/start.sh [DIR]     (the DIR given to setup.sh; same SERVER_PORT/STANDIN_PORT)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DIR=$(realpath -m "${1:-${REAL_SERVER_DIR:-$REPO/target/real-server}}")
SRC=$DIR/src/main/xiaozhi-server
SERVER_PORT=${SERVER_PORT:-8000}
STANDIN_PORT=${STANDIN_PORT:-8090}
[ -f "$SRC/data/.config.yaml" ] || { echo "start: run setup.sh $DIR first" >&2; exit 1; }
for p in standin server; do
    if [ -f "$DIR/$p.pid" ] && kill -0 "$(cat "$DIR/$p.pid")" 2>/dev/null; then
        echo "start: $p already running (pid $(cat "$DIR/$p.pid")); stop.sh first" >&2; exit 1
    fi
done
mkdir -p "$DIR/logs"
# Forget the wake-word reply the server caches at run time (made with the stand-in's TTS), so
# that every start answers its first wake word alike: with the repository's wakeup_words_short.wav.
rm -rf "$SRC/data/.wakeup_words.yaml" "$SRC/config/assets/wakeup_words"

wait_port() { # port seconds what
    for _ in $(seq $(($2 * 5))); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.2
    done
    echo "start: $3 did not open port $1 in $2 s; see $DIR/logs/" >&2; return 1
}

STANDIN_PORT=$STANDIN_PORT setsid "$DIR/venv/bin/python" -u "$HERE/standin.py" \
    >"$DIR/logs/standin.log" 2>&1 </dev/null &
echo $! >"$DIR/standin.pid"
wait_port "$STANDIN_PORT" 20 "the stand-in"

(cd "$SRC" && exec setsid "$DIR/venv/bin/python" -u app.py >"$DIR/logs/server.log" 2>&1 </dev/null) &
echo $! >"$DIR/server.pid"
wait_port "$SERVER_PORT" 120 "the server"

echo "stand-in: http://127.0.0.1:$STANDIN_PORT/  (pid $(cat "$DIR/standin.pid"), log $DIR/logs/standin.log)"
echo "server:   pid $(cat "$DIR/server.pid"), log $DIR/logs/server.log"
echo "ws://127.0.0.1:$SERVER_PORT/xiaozhi/v1/"
