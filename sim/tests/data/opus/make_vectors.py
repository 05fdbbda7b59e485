#!/usr/bin/env python3
"""Makes the libopus reference vectors the twin's Opus decoder is checked against.

Run once, outside the build (needs Debian `libopus0` and `pip install opuslib numpy`):

    python3 make_vectors.py

Writes, for each case, `<case>.packets` (u16 big-endian length + packet, repeated) and
`<case>.<rate>.pcm` (libopus's decode at that rate: int16 little-endian mono). Only the
outputs are committed; the test (`sim/tests/opus_vectors.rs`) never needs libopus.
"""
import ctypes
import struct

import numpy as np
import opuslib
import opuslib.api.encoder as enc
import opuslib.api.ctl as ctl


def speechlike(rate, seconds):
    """Harmonics of a gliding 120-220 Hz voice, syllable envelope at 4 Hz, one pause."""
    t = np.arange(int(rate * seconds)) / rate
    f0 = 120 + 100 * (0.5 + 0.5 * np.sin(2 * np.pi * 0.7 * t))
    phase = 2 * np.pi * np.cumsum(f0) / rate
    x = sum((0.6 / k) * np.sin(k * phase) for k in range(1, 16) if k * 220 < rate / 2)
    env = np.clip(np.sin(2 * np.pi * 4 * t), 0, None) ** 0.5
    env[(t > 1.0) & (t < 1.3)] = 0.0
    return np.round(np.clip(x * env * 0.25, -1, 1) * 32767).astype(np.int16)


def encode(pcm, rate, frame_ms, app, bitrate, complexity, dtx, voice):
    e = opuslib.Encoder(rate, 1, app)
    if voice:
        enc.encoder_ctl(e.encoder_state, ctl.set_signal, 3001)  # OPUS_SIGNAL_VOICE
    e.bitrate = bitrate
    e.complexity = complexity
    e.vbr = 1
    if dtx:
        enc.encoder_ctl(e.encoder_state, ctl.set_dtx, 1)
    n = rate * frame_ms // 1000
    out = []
    for i in range(0, len(pcm) - n + 1, n):
        out.append(e.encode(pcm[i:i + n].tobytes(), n))
    return out


def decode(packets, rate, frame_ms):
    d = opuslib.Decoder(rate, 1)
    n = rate * frame_ms // 1000
    return b"".join(d.decode(p, n) for p in packets)


CASES = {
    # xiaozhi-esp32-server's TTS encoder (core/utils/opus_encoder_utils.py at 7475ea2b).
    "tts24k": dict(rate=24000, frame_ms=60, app=opuslib.APPLICATION_AUDIO, bitrate=24000,
                   complexity=10, dtx=False, voice=True, decode_at=(16000, 24000)),
    # The firmware's microphone encoder (16 kHz, 60 ms, AUDIO, complexity 0, VBR, DTX).
    "mic16k": dict(rate=16000, frame_ms=60, app=opuslib.APPLICATION_AUDIO, bitrate=-1000,
                   complexity=0, dtx=True, voice=False, decode_at=(16000,)),
}

for name, c in CASES.items():
    pcm = speechlike(c["rate"], 2.0)
    packets = encode(pcm, c["rate"], c["frame_ms"], c["app"], c["bitrate"], c["complexity"], c["dtx"], c["voice"])
    with open(f"{name}.packets", "wb") as f:
        for p in packets:
            f.write(struct.pack(">H", len(p)) + p)
    for r in c["decode_at"]:
        with open(f"{name}.{r}.pcm", "wb") as f:
            f.write(decode(packets, r, c["frame_ms"]))
    sizes = [len(p) for p in packets]
    print(name, len(packets), "packets,", min(sizes), "-", max(sizes), "bytes,",
          "libopus", opuslib.api.info.get_version_string() if hasattr(opuslib.api, "info") else "")
