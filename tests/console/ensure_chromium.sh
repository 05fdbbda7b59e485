#!/usr/bin/env bash
# Installs Debian's chromium when it is missing (the console test drives it over the DevTools
# protocol); prints the browser's path. Used by .ci/run and tests/console.rs.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
mkdir -p "$root/target"
# Two tests may ask at once: one installs, the other waits.
exec 9>"$root/target/chromium.lock"
flock 9
for b in chromium chromium-browser; do
    if command -v "$b" >/dev/null; then
        command -v "$b"
        exit 0
    fi
done
sudo=""
if [ "$(id -u)" != 0 ]; then sudo="sudo"; fi
$sudo apt-get update -qq >&2
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq chromium >&2
command -v chromium
