#!/usr/bin/env bash
# Installs the official MCP Python SDK and xmlschema (both pinned) into target/mcp-venv, once.
# Used by .ci/run, tests/mcp_sdk.rs and tests/junit.rs (XSD validation); prints the interpreter path.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
venv="$root/target/mcp-venv"
version="2.3.0"
xmlschema="4.3.2"
mkdir -p "$root/target"
# Two tests may ask at once: one installs, the other waits.
exec 9>"$root/target/mcp-venv.lock"
flock 9
if ! "$venv/bin/python" -c "import mcp, xmlschema, importlib.metadata as m; assert m.version('mcp') == '$version' and m.version('xmlschema') == '$xmlschema'" 2>/dev/null; then
    rm -rf "$venv"
    python3 -m venv "$venv" >&2
    "$venv/bin/pip" install --quiet --disable-pip-version-check "mcp==$version" "xmlschema==$xmlschema" >&2
fi
echo "$venv/bin/python"
