#!/usr/bin/env bash
# Installs a browser from Debian when it is missing and prints its path: `chromium` (the console
# test drives it over the DevTools protocol), `firefox` (firefox-esr, driven over WebDriver BiDi)
# or `pulseaudio` (the sound server Firefox needs to run the page's audio on a machine without
# one). Used by .ci/run and tests/console*.rs. Usage: ensure_browser.sh chromium|firefox|pulseaudio
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
case "${1:-}" in
    chromium) names="chromium chromium-browser"; package=chromium ;;
    firefox) names="firefox-esr firefox"; package=firefox-esr ;;
    pulseaudio) names="pulseaudio"; package=pulseaudio ;;
    *) echo "usage: $0 chromium|firefox|pulseaudio" >&2; exit 2 ;;
esac
mkdir -p "$root/target"
# Two tests may ask at once: one installs, the other waits.
exec 9>"$root/target/browser.lock"
flock 9
for b in $names; do
    if command -v "$b" >/dev/null; then
        command -v "$b"
        exit 0
    fi
done
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$package" >&2
for b in $names; do
    if command -v "$b" >/dev/null; then
        command -v "$b"
        exit 0
    fi
done
echo "$package installed, but none of: $names" >&2
exit 1
