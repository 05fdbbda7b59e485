"""Drives `xiaozhi-twin stdio` with the official MCP Python SDK and prints what the SDK saw.

usage: drive_stdio.py BINARY BOARD (faithful|compat)

Prints one JSON object: the SDK's view of initialize, tools/list, tools/call set_volume (valid and
out of range), get_device_status and ping. Each step records either its result or the exception
type and message the SDK raised (with a timeout, since a reply the SDK cannot parse never
resolves its request). The Rust test (tests/mcp_sdk.rs) asserts on this object.
"""

import asyncio
import json
import sys

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

STEP_TIMEOUT_S = 5.0


async def step(out, name, coro):
    try:
        result = await asyncio.wait_for(coro, STEP_TIMEOUT_S)
        out[name] = {"ok": True, "result": result.model_dump(mode="json", exclude_none=True)}
    except asyncio.TimeoutError:
        out[name] = {"ok": False, "error": "timeout", "message": f"no answer within {STEP_TIMEOUT_S} s"}
    except Exception as e:  # noqa: BLE001 - we report whatever the SDK raises
        out[name] = {"ok": False, "error": type(e).__name__, "message": str(e)}


async def main(binary, board, mode):
    args = ["stdio", "--board", board] + (["--compat"] if mode == "compat" else [])
    params = StdioServerParameters(command=binary, args=args)
    out = {"mode": mode}
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await step(out, "initialize", session.initialize())
            await step(out, "tools_list", session.list_tools())
            await step(out, "set_volume", session.call_tool("self.audio_speaker.set_volume", {"volume": 35}))
            await step(out, "get_device_status", session.call_tool("self.get_device_status", {}))
            await step(out, "set_volume_out_of_range", session.call_tool("self.audio_speaker.set_volume", {"volume": 101}))
            await step(out, "ping", session.send_ping())
    print(json.dumps(out, ensure_ascii=False))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3]))
