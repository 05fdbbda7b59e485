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
                                 (a request in English is answered in English)
  POST /v1/audio/speech          the `custom` TTS: 1.5 s of 440 Hz at -12 dBFS, 24 kHz mono WAV
  POST /v1/audio/transcriptions  the OpenAI ASR: the text of the audit's clip the upload sounds
                                 most like (the clips of STANDIN_CLIPS, default the shipped
                                 audits/clips/index.yaml: each clip's loudness envelope, 20 ms
                                 frames, silence trimmed, compared by correlation after
                                 stretching to one length; no speech recognition), else
                                 STANDIN_ASR_TEXT (default 声音调小一点)
  GET  /health                   ok

Every request is logged on stdout, one line each. Port: STANDIN_PORT (default 8090).
"""
import io
import json
import math
import os
import re
import struct
import time
import uuid
import wave

from aiohttp import web

PORT = int(os.environ.get("STANDIN_PORT", "8090"))
ASR_TEXT = os.environ.get("STANDIN_ASR_TEXT", "声音调小一点")
LLM = os.environ.get("STANDIN_LLM", "trusting")
CLIPS = os.environ.get(
    "STANDIN_CLIPS", os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../audits/clips/index.yaml")
)
SET = "self_audio_speaker_set_volume"
READ = "self_get_device_status"
AFTER_TOOL = "音量已经调小了"
DEFAULT_REPLY = "好的，我在听"
# The same in English, for a request in English (the twin's backends/llm/understanding.yaml).
ENGLISH = {
    AFTER_TOOL: "OK, I've turned the volume down.",
    DEFAULT_REPLY: "OK, I'm listening.",
}


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


def english(text):
    """Whether a request is in English (more ASCII letters than CJK characters)."""
    latin = sum(c.isascii() and c.isalpha() for c in text)
    return latin > sum("\u4e00" <= c <= "\u9fff" for c in text)


def decide(messages):
    """decide_in_chinese, its texts in English for a request in English."""
    kind, answer = decide_in_chinese(messages)
    users = [m for m in messages if m.get("role") == "user"]
    if kind == "text" and users and english(text_of(users[-1])):
        volume = re.search(r"\d+", answer)
        if answer.startswith("现在音量是"):
            answer = f"The volume is {volume.group()} now. Shall I change it?"
        elif answer.startswith("设置好像没有生效"):
            answer = f"That did not seem to take effect: the volume is {volume.group()}."
        else:
            answer = ENGLISH.get(answer, answer)
    return kind, answer


def decide_in_chinese(messages):
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


def envelope(wav_bytes):
    """The loudness envelope of a mono 16-bit WAV: dB per 20 ms frame, silence (40 dB under the
    loudest frame) trimmed from both ends."""
    with wave.open(io.BytesIO(wav_bytes), "rb") as w:
        rate, width, channels = w.getframerate(), w.getsampwidth(), w.getnchannels()
        raw = w.readframes(w.getnframes())
    if width != 2:
        return []
    pcm = struct.unpack(f"<{len(raw) // 2}h", raw)[::channels]
    step = max(1, rate // 50)
    env = []
    for i in range(0, len(pcm) - step + 1, step):
        frame = pcm[i : i + step]
        power = sum(x * x for x in frame) / len(frame)
        env.append(10 * math.log10(power + 1.0))
    if not env:
        return []
    floor = max(env) - 40
    voiced = [i for i, e in enumerate(env) if e > floor]
    return env[voiced[0] : voiced[-1] + 1]


def stretched(env, n=64):
    return [env[min(len(env) - 1, i * len(env) // n)] for i in range(n)]


def likeness(a, b):
    """Correlation of two envelopes stretched to one length, less a penalty for unlike lengths."""
    if len(a) < 3 or len(b) < 3:
        return -1.0
    x, y = stretched(a), stretched(b)
    mx, my = sum(x) / len(x), sum(y) / len(y)
    cov = sum((p - mx) * (q - my) for p, q in zip(x, y))
    vx = math.sqrt(sum((p - mx) ** 2 for p in x)) or 1.0
    vy = math.sqrt(sum((q - my) ** 2 for q in y)) or 1.0
    ratio = min(len(a), len(b)) / max(len(a), len(b))
    return cov / (vx * vy) - 2 * (1 - ratio)


def load_clips(index):
    """(text, envelope) of every clip of a clip index (one `- { lang, text, wav }` per line)."""
    clips = []
    try:
        lines = open(index, encoding="utf-8").read().splitlines()
    except OSError as e:
        log("CLIPS", error=str(e))
        return clips
    for line in lines:
        text = re.search(r'text: "([^"]*)"', line)
        name = re.search(r"wav: (\S+?)\s*}", line)
        if text and name:
            with open(os.path.join(os.path.dirname(index), name.group(1)), "rb") as f:
                clips.append((text.group(1), envelope(f.read())))
    log("CLIPS", index=index, clips=len(clips))
    return clips


KNOWN = []


async def transcriptions(request):
    upload = b""
    if request.content_type.startswith("multipart/"):
        reader = await request.multipart()
        async for part in reader:
            data = await part.read()
            if part.name == "file":
                upload = data
    else:
        upload = await request.read()
    text, score = ASR_TEXT, None
    try:
        heard = envelope(upload)
        best = max(((likeness(heard, env), t) for t, env in KNOWN), default=None)
        if best and best[0] > 0.5:
            score, text = round(best[0], 3), best[1]
    except (wave.Error, EOFError, struct.error) as e:
        log("ASR", error=str(e))
    log("ASR", upload_bytes=len(upload), text=text, likeness=score)
    return web.json_response({"text": text})


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
    KNOWN.extend(load_clips(CLIPS))
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
