#!/usr/bin/env bash
# Draws the screen scenarios' HTML report and photographs it in headless Chromium (docs/screen.md,
# "The screen in reports"). A manual check: CI does not install a browser. Usage:
#
#   manual/screen-in-a-browser/check.sh [OUT_DIR]
#
# Needs `chromium` on PATH (Debian: `apt-get install chromium`). Writes OUT_DIR/report.html and
# OUT_DIR/report.png (1100 px wide); look at the PNG: each record's screen and the filmstrips
# should show as pictures (the OLEDs at twice their size), not as broken images.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-target/screen-in-a-browser}"
mkdir -p "$out"
if ! command -v chromium >/dev/null; then
    echo "check.sh: chromium is not installed (Debian: apt-get install chromium)" >&2
    exit 2
fi
cargo run --release --locked -q -- run \
    scenarios/s01-the-screen-you-see.yaml \
    scenarios/s02-the-volume-buttons-on-the-screen.yaml \
    scenarios/q25-oled-theme-is-misleading.yaml \
    --html "$out/report.html" >/dev/null
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1100,9000 \
    --screenshot="$(realpath "$out")/report.png" "file://$(realpath "$out")/report.html" 2>/dev/null
echo "wrote $out/report.html and $out/report.png"
