#!/usr/bin/env bash
# Sets up the real xiaozhi-esp32-server (python, main/xiaozhi-server) at a pinned commit, for
# the manual checks of docs/voice.md and docs/fleet.md. Idempotent: run it again at will.
#
#   manual/real-server/setup.sh [DIR]     DIR (or $REAL_SERVER_DIR), default target/real-server
#
# Environment:
#   XIAOZHI_SERVER_GIT  where the server's git history comes from: a local git directory (bare or
#                       not) or a URL (default: the upstream repository on GitHub)
#   XIAOZHI_SERVER_COMMIT  default 7475ea2b (the commit the manual checks were done at)
#   PYTHON              default python3.11
#   SERVER_PORT, HTTP_PORT, STANDIN_PORT, LOG_LEVEL   written into the config (8000, 8003, 8090, DEBUG)
#   MQTT_GATEWAY, MQTT_SIGNATURE_KEY   server.mqtt_gateway (host:port; empty: the OTA hands out
#                       WebSocket) and server.mqtt_signature_key (manual/real-gateway)
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
DIR=$(realpath -m "${1:-${REAL_SERVER_DIR:-$REPO/target/real-server}}")
GIT_SRC=${XIAOZHI_SERVER_GIT:-https://github.com/xinnan-tech/xiaozhi-esp32-server.git}
COMMIT=${XIAOZHI_SERVER_COMMIT:-7475ea2b}
PYTHON=${PYTHON:-python3.11}
SRC=$DIR/src/main/xiaozhi-server
mkdir -p "$DIR"
say() { echo "setup: $*"; }

# 1. System packages: ffmpeg (pydub decodes the TTS's audio with it) and libopus (opuslib_next).
if ! command -v ffmpeg >/dev/null || ! ldconfig -p | grep -q 'libopus\.so\.0'; then
    say "apt-get install ffmpeg libopus0"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ffmpeg libopus0 >/dev/null
fi

# 2. The server's source at the commit (only main/xiaozhi-server).
if [ "$(cat "$DIR/src/.commit" 2>/dev/null)" != "$COMMIT" ]; then
    if [ -d "$GIT_SRC" ]; then
        GIT_DIR=$(git -C "$GIT_SRC" rev-parse --absolute-git-dir)
    else
        GIT_DIR=$DIR/git
        [ -d "$GIT_DIR" ] || git clone --bare --filter=blob:none "$GIT_SRC" "$GIT_DIR"
        git --git-dir="$GIT_DIR" cat-file -e "$COMMIT^{commit}" 2>/dev/null ||
            git --git-dir="$GIT_DIR" fetch -q origin "$COMMIT"
    fi
    FULL=$(git --git-dir="$GIT_DIR" rev-parse "$COMMIT^{commit}")
    say "extracting main/xiaozhi-server at $FULL"
    rm -rf "$DIR/src" && mkdir -p "$DIR/src"
    # File by file, so that a mirror missing a few large blobs (music) still gives the server.
    git --git-dir="$GIT_DIR" ls-tree -r -z "$FULL" main/xiaozhi-server |
        while IFS= read -r -d '' entry; do
            sha=$(cut -d' ' -f3 <<<"${entry%%$'\t'*}")
            path=${entry#*$'\t'}
            mkdir -p "$DIR/src/$(dirname "$path")"
            git --git-dir="$GIT_DIR" cat-file blob "$sha" >"$DIR/src/$path" 2>/dev/null ||
                { say "not in the history's objects, skipped: $path"; rm -f "$DIR/src/$path"; }
        done
    echo "$COMMIT" >"$DIR/src/.commit"
fi

# 3. A venv with the server's requirements minus the model packages (torch, funasr, modelscope,
#    sherpa-onnx, vosk, silero_vad: SileroVAD runs on onnxruntime with the ONNX file in models/).
REQ=$DIR/requirements-light.txt
{ grep -v -E '^(torch|torchaudio|funasr|modelscope|sherpa_onnx|vosk|silero_vad)\b' "$SRC/requirements.txt"
  echo "onnxruntime==1.32.0"; } >"$REQ"
if ! cmp -s "$REQ" "$DIR/venv/.installed" 2>/dev/null; then
    [ -x "$DIR/venv/bin/python" ] || "$PYTHON" -m venv "$DIR/venv"
    say "pip install ($(grep -c -v '^#' "$REQ") requirements)"
    "$DIR/venv/bin/pip" install -q -r "$REQ"
    cp "$REQ" "$DIR/venv/.installed"
fi

# 4. Local config mode: data/.config.yaml overrides config.yaml.
mkdir -p "$SRC/data" "$SRC/tmp"
# The prompt without the device's location and weather, whose look-ups would leave loopback.
grep -v -E '\{\{(local_address|weather_info)\}\}' "$SRC/agent-base-prompt.txt" >"$SRC/data/agent-base-prompt.loopback.txt"
sed -e "s/@SERVER_PORT@/${SERVER_PORT:-8000}/g" -e "s/@HTTP_PORT@/${HTTP_PORT:-8003}/g" \
    -e "s/@STANDIN_PORT@/${STANDIN_PORT:-8090}/g" -e "s/@LOG_LEVEL@/${LOG_LEVEL:-DEBUG}/g" \
    -e "s/@MQTT_GATEWAY@/${MQTT_GATEWAY:-}/g" -e "s/@MQTT_SIGNATURE_KEY@/${MQTT_SIGNATURE_KEY:-}/g" \
    "$HERE/config.yaml" >"$SRC/data/.config.yaml"
# 5. The spoken utterance of the manual checks: the server's own Chinese speech sample (5.6 s).
[ -f "$DIR/zh16k.wav" ] ||
    ffmpeg -hide_banner -loglevel error -i "$SRC/models/SenseVoiceSmall/example/zh.mp3" \
        -ac 1 -ar 16000 -sample_fmt s16 "$DIR/zh16k.wav"
say "ready in $DIR (start it with manual/real-server/start.sh $DIR)"
