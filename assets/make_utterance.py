#!/usr/bin/env python3
"""Writes utterance-2s.wav, the fleet's default utterance: 2.0 s, 16 kHz mono int16, a
speech-like voice (harmonics of a pitch gliding 120-220 Hz, a 4 Hz syllable envelope that never
falls below a third, peak -6 dBFS), so every 60 ms frame is voice for the backends' energy rule
and the last frame of the file is the last voiced frame. Standard library only."""
import math, struct, wave

RATE, SECONDS, PEAK_DBFS = 16000, 2.0, -6.0
n = int(RATE * SECONDS)
amp = 32767 * 10 ** (PEAK_DBFS / 20)
phase, out = 0.0, []
for i in range(n):
    t = i / RATE
    f0 = 170 + 50 * math.sin(2 * math.pi * 0.7 * t)
    phase += 2 * math.pi * f0 / RATE
    env = 0.35 + 0.65 * abs(math.sin(2 * math.pi * 2.0 * t + 0.4))
    x = sum(math.sin(k * phase) / k for k in range(1, 12)) / 1.9
    out.append(max(-32768, min(32767, round(amp * env * x))))
with wave.open("utterance-2s.wav", "wb") as w:
    w.setnchannels(1)
    w.setsampwidth(2)
    w.setframerate(RATE)
    w.writeframes(struct.pack(f"<{n}h", *out))
