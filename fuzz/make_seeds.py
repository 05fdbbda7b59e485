#!/usr/bin/env python3
"""Writes the seed corpus from the public conformance requests (tests/conformance/*.requests.*):
fuzz/seeds/cjson_parse/<n> holds one raw payload, fuzz/seeds/device_frame/<n> a control byte
(the board) followed by the payload, or by a whole #burst joined with newlines."""
import glob, json, os, sys

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Control byte per request file: the board index in fuzz_targets/device_frame.rs.
BOARD = {"bread-compact-wifi": 0, "bread-compact-wifi-lcd": 1, "bread-compact-wifi-s3cam": 2, "otto-robot": 3}
payloads, frames = [], []
for path in sorted(glob.glob(os.path.join(root, "tests/conformance/*.requests.*"))):
    board = BOARD[os.path.basename(path).split(".")[0]]
    for line in open(path, "rb").read().split(b"\n"):
        line = line.rstrip(b"\r")
        if not line or line.startswith(b"#sleep"):
            continue
        if line.startswith(b"#burst"):
            burst = [p.encode() for p in json.loads(line[len(b"#burst"):])]
            payloads.extend(burst)
            frames.append(bytes([board]) + b"\n".join(burst))
        else:
            payloads.append(line)
            frames.append(bytes([board]) + line)
for name, items in (("cjson_parse", payloads), ("device_frame", frames)):
    out = os.path.join(root, "fuzz/seeds", name)
    os.makedirs(out, exist_ok=True)
    for i, item in enumerate(dict.fromkeys(items)):
        with open(os.path.join(out, f"{i:03}"), "wb") as f:
            f.write(item)
    print(f"{out}: {len(dict.fromkeys(items))} seeds", file=sys.stderr)
