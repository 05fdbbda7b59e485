#!/usr/bin/env python3
"""Stand-in for the cloud services of xiaozhi-esp32-server, on loopback (stdlib + aiohttp).

  POST /v1/chat/completions      the `openai` LLM, streaming (SSE) or not, behaving as
                                 STANDIN_LLM says (default trusting; the behaviours of the twin's
                                 built-in stand-in, backends/llm/*.yaml, for one request: lower the
                                 volume, 调小 or "turn the volume down"):
                                   trusting    set_volume (the volume the conversation knows - 20,
                                               at least 10; else 40), then 音量已经调小了 on its
                                               result
                                   honest      get_device_status, set_volume (value - 20, at least
                                               10), get_device_status again, then the claim only
                                               if the readback agrees
                                   lazy        as trusting; asked again in the conversation, the
                                               claim without a call
                                   asks-back   get_device_status, then 现在音量是N，需要调整吗？
                                   mute-happy  set_volume 0, then the claim
                                 anything else                 -> 好的，我在听
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
LLM = os.environ.get("STANDIN_LLM", "trusting")
SET = "self_audio_speaker_set_volume"
READ = "self_get_device_status"
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


def wants_lower(text):
    return "调小" in text or "turn the volume down" in text.lower()


def volume_in(content):
    """The volume in a get_device_status result as the server hands it over (its JSON text)."""
    try:
        return json.loads(content)["audio_speaker"]["volume"]
    except (ValueError, KeyError, TypeError):
        return None


def known_volume(messages):
    """The volume the conversation so far tells: the last one set (and answered) or read."""
    known = None
    for i, m in enumerate(messages):
        for c in m.get("tool_calls") or []:
            answer = messages[i + 1] if i + 1 < len(messages) else {}
            if c["function"]["name"] == SET and text_of(answer).strip() == "true":
                known = json.loads(c["function"]["arguments"]).get("volume", known)
            elif c["function"]["name"] == READ:
                known = volume_in(text_of(answer)) or known
    return known


def decide(messages):
    """('tool', (name, args)) or ('text', reply), from the conversation as the LLM sees it."""
    last = messages[-1] if messages else {}
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if not users or not wants_lower(text_of(messages[users[-1]])):
        return "text", DEFAULT_REPLY
    turn = messages[users[-1] + 1 :]
    called = [c["function"]["name"] for m in turn for c in (m.get("tool_calls") or [])]
    if last.get("role") == "user":
        earlier = any(wants_lower(text_of(messages[i])) for i in users[:-1])
        if LLM == "lazy" and earlier:
            return "text", AFTER_TOOL
        if LLM in ("honest", "asks-back"):
            return "tool", (READ, {})
        if LLM == "mute-happy":
            return "tool", (SET, {"volume": 0})
        known = known_volume(messages[: users[-1]])
        return "tool", (SET, {"volume": 40 if known is None else max(known - 20, 10)})
    if last.get("role") != "tool":
        return "text", DEFAULT_REPLY
    answered = called[-1] if called else SET
    if answered == READ:
        volume = volume_in(text_of(last))
        if LLM == "asks-back":
            return "text", f"现在音量是{volume}，需要调整吗？"
        if LLM == "honest" and SET not in called and volume is not None:
            return "tool", (SET, {"volume": max(volume - 20, 10)})
        if LLM == "honest":
            asked = next(
                (json.loads(c["function"]["arguments"]).get("volume") for m in turn for c in (m.get("tool_calls") or []) if c["function"]["name"] == SET),
                None,
            )
            return ("text", AFTER_TOOL) if volume == asked else ("text", f"设置好像没有生效，现在音量是{volume}")
    if LLM == "honest" and answered == SET:
        return "tool", (READ, {})
    return "text", AFTER_TOOL


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
    kind, answer = decide(messages)
    reply = answer if kind == "text" else None
    last = messages[-1] if messages else {}
    log(
        "LLM",
        stream=stream,
        messages=len(messages),
        tools=len(body.get("tools") or []),
        last_role=last.get("role"),
        last=text_of(last)[:80],
        answer=f"tool {answer[0]} {json.dumps(answer[1])}" if kind == "tool" else reply,
    )
    cid = "chatcmpl-" + uuid.uuid4().hex[:12]
    call = None
    if kind == "tool":
        name, args = answer
        call = {"id": "call_" + uuid.uuid4().hex[:8], "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
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
    log("START", port=PORT, llm=LLM)
    web.run_app(app, host="127.0.0.1", port=PORT, print=None, access_log=None)


if __name__ == "__main__":
    main()
