#!/usr/bin/env python3
"""Stand-in for the cloud services of xiaozhi-esp32-server, on loopback (stdlib + aiohttp).

  POST /v1/chat/completions      the `openai` LLM, streaming (SSE) or not:
                                 last message a tool result   -> 音量已经调小了
                                 last user message has 调小    -> tool call
                                                                 self_audio_speaker_set_volume {"volume":40}
                                 otherwise                     -> 好的，我在听
  POST /v1/audio/speech          the `custom` TTS: 1.5 s of 440 Hz at -12 dBFS, 24 kHz mono WAV
  POST /v1/audio/transcriptions  the OpenAI ASR: {"text": STANDIN_ASR_TEXT} (default 声音调小一点)
  GET  /health                   ok

Every request is logged on stdout, one line each. Port: STANDIN_PORT (default 8090).
"""
import io
import json
import math
import os
import struct
import time
import uuid
import wave

from aiohttp import web

PORT = int(os.environ.get("STANDIN_PORT", "8090"))
ASR_TEXT = os.environ.get("STANDIN_ASR_TEXT", "声音调小一点")
TOOL = "self_audio_speaker_set_volume"
TOOL_ARGS = json.dumps({"volume": 40})
AFTER_TOOL = "音量已经调小了"
DEFAULT_REPLY = "好的，我在听"


def log(what, **fields):
    stamp = time.strftime("%H:%M:%S") + f".{int(time.time() * 1000) % 1000:03d}"
    print(f"{stamp} {what} {json.dumps(fields, ensure_ascii=False)}", flush=True)


def tone_wav(seconds=1.5, hz=440.0, dbfs=-12.0, rate=24000):
    amp = 32767 * 10 ** (dbfs / 20)
    n = int(seconds * rate)
    pcm = struct.pack(f"<{n}h", *(round(amp * math.sin(2 * math.pi * hz * i / rate)) for i in range(n)))
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm)
    return buf.getvalue()


TONE = tone_wav()


def text_of(message):
    content = message.get("content") or ""
    if isinstance(content, list):  # content parts
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return content


def decide(messages):
    """('tool', None) or ('text', reply), from the conversation as the LLM would see it."""
    last = messages[-1] if messages else {}
    if last.get("role") == "tool":
        return "text", AFTER_TOOL
    users = [m for m in messages if m.get("role") == "user"]
    if users and "调小" in text_of(users[-1]) and last.get("role") == "user":
        return "tool", None
    return "text", DEFAULT_REPLY


def chunk(cid, delta, finish=None):
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": "standin",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


async def chat(request):
    body = await request.json()
    messages = body.get("messages", [])
    stream = bool(body.get("stream"))
    kind, reply = decide(messages)
    last = messages[-1] if messages else {}
    log(
        "LLM",
        stream=stream,
        messages=len(messages),
        tools=len(body.get("tools") or []),
        last_role=last.get("role"),
        last=text_of(last)[:80],
        answer=f"tool {TOOL} {TOOL_ARGS}" if kind == "tool" else reply,
    )
    cid = "chatcmpl-" + uuid.uuid4().hex[:12]
    call = {"id": "call_" + uuid.uuid4().hex[:8], "type": "function", "function": {"name": TOOL, "arguments": TOOL_ARGS}}
    if not stream:
        message = {"role": "assistant", "content": reply}
        if kind == "tool":
            message = {"role": "assistant", "content": None, "tool_calls": [call]}
        return web.json_response(
            {
                "id": cid,
                "object": "chat.completion",
                "created": int(time.time()),
                "model": "standin",
                "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if kind == "tool" else "stop"}],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)

    async def send(obj):
        await resp.write(b"data: " + json.dumps(obj, ensure_ascii=False).encode() + b"\n\n")

    await send(chunk(cid, {"role": "assistant", "content": ""}))
    if kind == "tool":
        await send(chunk(cid, {"tool_calls": [dict(call, index=0)]}))
        await send(chunk(cid, {}, "tool_calls"))
    else:
        for i in range(0, len(reply), 3):  # a few pieces, as a real stream
            await send(chunk(cid, {"content": reply[i : i + 3]}))
        await send(chunk(cid, {}, "stop"))
    await resp.write(b"data: [DONE]\n\n")
    await resp.write_eof()
    return resp


async def speech(request):
    try:
        body = await request.json()
    except Exception:
        body = dict(request.query)
    log("TTS", text=str(body.get("input", body))[:80], bytes=len(TONE))
    return web.Response(body=TONE, content_type="audio/wav")


async def transcriptions(request):
    size = 0
    if request.content_type.startswith("multipart/"):
        reader = await request.multipart()
        async for part in reader:
            size += len(await part.read())
    else:
        size = len(await request.read())
    log("ASR", upload_bytes=size, text=ASR_TEXT)
    return web.json_response({"text": ASR_TEXT})


async def health(request):
    return web.Response(text="ok")


@web.middleware
async def log_unknown(request, handler):
    try:
        return await handler(request)
    except web.HTTPNotFound:
        log("UNKNOWN", method=request.method, path=request.path)
        raise


def main():
    app = web.Application(middlewares=[log_unknown], client_max_size=64 * 1024 * 1024)
    app.router.add_post("/v1/chat/completions", chat)
    app.router.add_post("/chat/completions", chat)
    app.router.add_route("*", "/v1/audio/speech", speech)
    app.router.add_post("/v1/audio/transcriptions", transcriptions)
    app.router.add_get("/health", health)
    log("START", port=PORT)
    web.run_app(app, host="127.0.0.1", port=PORT, print=None, access_log=None)


if __name__ == "__main__":
    main()
