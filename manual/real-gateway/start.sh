#!/usr/bin/env bash
# Starts the real xiaozhi-mqtt-gateway set up by setup.sh (node app.js, its own MQTT server, UDP
# and admin API); waits for the MQTT port. Log: DIR/logs/gateway.log.
#
#   manual/real-gateway/start.sh [DIR]    (the DIR given to setup.sh)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DIR=$(realpath -m "${1:-${REAL_GATEWAY_DIR:-$REPO/target/real-gateway}}")
SRC=$DIR/src
[ -f "$SRC/.env" ] || { echo "start: run setup.sh $DIR first" >&2; exit 1; }
if [ -f "$DIR/gateway.pid" ] && kill -0 "$(cat "$DIR/gateway.pid")" 2>/dev/null; then
    echo "start: the gateway is already running (pid $(cat "$DIR/gateway.pid")); stop.sh first" >&2
    exit 1
fi
MQTT_PORT=$(sed -n 's/^MQTT_PORT=//p' "$SRC/.env")
mkdir -p "$DIR/logs"
(cd "$SRC" && exec setsid node app.js >"$DIR/logs/gateway.log" 2>&1 </dev/null) &
echo $! >"$DIR/gateway.pid"
for _ in $(seq 100); do
    (exec 3<>"/dev/tcp/127.0.0.1/$MQTT_PORT") 2>/dev/null && break
    sleep 0.2
done
(exec 3<>"/dev/tcp/127.0.0.1/$MQTT_PORT") 2>/dev/null ||
    { echo "start: the gateway did not open port $MQTT_PORT; see $DIR/logs/gateway.log" >&2; exit 1; }
echo "gateway: pid $(cat "$DIR/gateway.pid"), log $DIR/logs/gateway.log"
echo "mqtt://127.0.0.1:$MQTT_PORT"
