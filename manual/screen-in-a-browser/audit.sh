#!/usr/bin/env bash
# Writes `audit --html` for the honest stand-in, the requests spoken, and photographs it in
# headless Chromium (docs/audit.md, "The HTML page"). A manual check: CI does not install a
# browser. Usage:
#
#   manual/screen-in-a-browser/audit.sh [OUT_DIR]
#
# Needs `chromium` on PATH (Debian: `apt-get install chromium`; for the Chinese requests and
# replies also a CJK font, `apt-get install fonts-noto-cjk`). Writes OUT_DIR/audit.html,
# OUT_DIR/audit.png (the scorecard) and OUT_DIR/amp-off.png (the amp-off and brightness items
# alone); look at them: a coloured bar per item, the Chinese text as text (not boxes), each
# record's delivery (the clip), what the backend heard, calls, value, sentences, claim and
# verdict, and a sound lane per request.
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-target/screen-in-a-browser}"
mkdir -p "$out"
if ! command -v chromium >/dev/null; then
    echo "audit.sh: chromium is not installed (Debian: apt-get install chromium)" >&2
    exit 2
fi
cargo run --release --locked -q -- audit --llm honest --delivery spoken --quiet --html "$out/audit.html" >/dev/null || true
python3 - "$out" <<'PY'
import sys
out = sys.argv[1]
s = open(f"{out}/audit.html", encoding="utf-8").read()
head = s[: s.index("<body>") + 6]
parts = []
for item in ("amp-off", "brightness"):
    a = s.index(f'<section class="item" id="i-{item}"')
    parts.append(s[a : s.index("</section>", a) + 10])
open(f"{out}/amp-off.html", "w", encoding="utf-8").write(head + "".join(parts) + "</body></html>")
PY
for page in audit amp-off; do
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1280,1500 \
        --screenshot="$(realpath "$out")/$page.png" "file://$(realpath "$out")/$page.html" 2>/dev/null
done
echo "wrote $out/audit.html, $out/audit.png and $out/amp-off.png"
