#!/usr/bin/env bash
# Sets up the real xiaozhi-mqtt-gateway (xinnan-tech's, Node.js) at a pinned commit, in front of
# the real xiaozhi-esp32-server of manual/real-server, for the manual check of docs/mqtt.md.
# Idempotent: run it again at will.
#
#   manual/real-gateway/setup.sh [DIR]    DIR (or $REAL_GATEWAY_DIR), default target/real-gateway
#
# Environment:
#   XIAOZHI_GATEWAY_GIT     where the gateway's git history comes from: a local git directory or a
#                           URL (default: the upstream repository on GitHub)
#   XIAOZHI_GATEWAY_COMMIT  default 93f026a (the commit the manual check was done at)
#   MQTT_PORT, UDP_PORT, API_PORT   the gateway's ports (1883, 8884, 8007; all on 127.0.0.1)
#   MQTT_SIGNATURE_KEY      the key it checks passwords with; the server's setup must be given the
#                           same one (default TwinCheck2026Key)
#   CHAT_SERVER             the server's WebSocket for the gateway, with the integration doc's
#                           suffix (default ws://127.0.0.1:8000/xiaozhi/v1/?from=mqtt_gateway)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DIR=$(realpath -m "${1:-${REAL_GATEWAY_DIR:-$REPO/target/real-gateway}}")
GIT_SRC=${XIAOZHI_GATEWAY_GIT:-https://github.com/xinnan-tech/xiaozhi-mqtt-gateway.git}
COMMIT=${XIAOZHI_GATEWAY_COMMIT:-93f026a}
SRC=$DIR/src
mkdir -p "$DIR"
say() { echo "setup: $*"; }
command -v node >/dev/null && command -v npm >/dev/null || { say "needs node and npm"; exit 1; }

# 1. The gateway's source at the commit.
if [ "$(cat "$SRC/.commit" 2>/dev/null)" != "$COMMIT" ]; then
    if [ -d "$GIT_SRC" ]; then
        GIT_DIR=$(git -C "$GIT_SRC" rev-parse --absolute-git-dir)
    else
        GIT_DIR=$DIR/git
        [ -d "$GIT_DIR" ] || git clone --bare -q "$GIT_SRC" "$GIT_DIR"
    fi
    FULL=$(git --git-dir="$GIT_DIR" rev-parse "$COMMIT^{commit}")
    say "extracting the gateway at $FULL"
    rm -rf "$SRC" && mkdir -p "$SRC"
    git --git-dir="$GIT_DIR" archive "$FULL" | tar -x -C "$SRC"
    rm -rf "$SRC/node_modules"
    echo "$COMMIT" >"$SRC/.commit"
fi

# 2. Its dependencies (debug, dotenv, express, libopus-wasm, ws), from the npm registry.
if [ ! -d "$SRC/node_modules" ]; then
    say "npm install"
    (cd "$SRC" && npm install --omit=dev --no-audit --no-fund --loglevel=error)
fi

# 3. Its configuration: the chat server (with ?from=mqtt_gateway), debug logging, the ports and
#    the signature key; everything on loopback. No SERVER_SECRET: the server's auth is off.
cat >"$SRC/config/mqtt.json" <<JSON
{
    "production": { "chat_servers": ["${CHAT_SERVER:-ws://127.0.0.1:8000/xiaozhi/v1/?from=mqtt_gateway}"] },
    "debug": true,
    "max_mqtt_payload_size": 8192,
    "mcp_client": {
        "capabilities": {},
        "client_info": { "name": "xiaozhi-mqtt-client", "version": "1.0.0" },
        "max_tools_count": 128
    }
}
JSON
cat >"$SRC/.env" <<ENV
PUBLIC_IP=127.0.0.1
MQTT_PORT=${MQTT_PORT:-1883}
UDP_PORT=${UDP_PORT:-8884}
API_PORT=${API_PORT:-8007}
MQTT_SIGNATURE_KEY=${MQTT_SIGNATURE_KEY:-TwinCheck2026Key}
ENV
say "ready in $DIR (start it with manual/real-gateway/start.sh $DIR)"
