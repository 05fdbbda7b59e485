#!/usr/bin/env python3
"""Compare LVGL host reference PNGs with the twin's golden PNGs of the same name.

Standard library only. Reads 8-bit RGB / RGBA (and grey / grey+alpha) non-interlaced PNGs.
A pixel differs when its max channel difference (R, G, B; alpha ignored) is > --tol (8).

usage: compare.py [--ref DIR] [--twin DIR] [--diff DIR] [--max PCT] [--tol N] [--modes assets,builtin]
  --ref   reference root; PNGs are taken from <ref>/<mode>/ (default /tmp/lvgl-host/out)
  --twin  twin golden dir (default tests/golden/screen beside this folder)
  --diff  write <diff>/<mode>/<name> with differing pixels red over a dimmed twin picture
  --max   exit 1 if any picture has more than this % of differing pixels (default 0.5)
"""
import argparse
import os
import struct
import sys
import zlib


def read_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path}: not a PNG")
    pos, idat, hdr = 8, [], None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        ctype = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if ctype == b"IHDR":
            hdr = struct.unpack(">IIBBBBB", body)
        elif ctype == b"IDAT":
            idat.append(body)
        elif ctype == b"IEND":
            break
    w, h, depth, ctype_, _, _, interlace = hdr
    channels = {0: 1, 2: 3, 4: 2, 6: 4}.get(ctype_)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"{path}: unsupported PNG (depth {depth}, colour type {ctype_}, interlace {interlace})")
    raw = zlib.decompress(b"".join(idat))
    stride = w * channels
    out = bytearray(w * h * 3)
    prev = bytearray(stride)
    p = 0
    for y in range(h):
        ft = raw[p]
        line = bytearray(raw[p + 1:p + 1 + stride])
        p += 1 + stride
        bpp = channels
        if ft == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 0xFF
        elif ft == 2:
            for i in range(stride):
                line[i] = (line[i] + prev[i]) & 0xFF
        elif ft == 3:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((a + prev[i]) >> 1)) & 0xFF
        elif ft == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                pr = a if (pa <= pb and pa <= pc) else (b if pb <= pc else c)
                line[i] = (line[i] + pr) & 0xFF
        elif ft != 0:
            raise ValueError(f"{path}: bad filter {ft}")
        prev = line
        o = y * w * 3
        if channels == 3:
            out[o:o + w * 3] = line
        elif channels == 4:
            out[o:o + w * 3:3] = line[0::4]
            out[o + 1:o + w * 3:3] = line[1::4]
            out[o + 2:o + w * 3:3] = line[2::4]
        else:
            g = line[0::channels]
            out[o:o + w * 3:3] = g
            out[o + 1:o + w * 3:3] = g
            out[o + 2:o + w * 3:3] = g
    return w, h, out


def write_png(path, w, h, rgb):
    raw = b"".join(b"\x00" + bytes(rgb[y * w * 3:(y + 1) * w * 3]) for y in range(h))

    def chunk(t, d):
        return struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def compare(ref_path, twin_path, tol, diff_path=None):
    rw, rh, ref = read_png(ref_path)
    tw, th, twin = read_png(twin_path)
    if (rw, rh) != (tw, th):
        return None, f"size {rw}x{rh} vs twin {tw}x{th}"
    n = rw * rh
    bad = 0
    x1, y1, x2, y2 = rw, rh, -1, -1
    diff = bytearray(n * 3) if diff_path else None
    for i in range(n):
        j = i * 3
        d = max(abs(ref[j] - twin[j]), abs(ref[j + 1] - twin[j + 1]), abs(ref[j + 2] - twin[j + 2]))
        if d > tol:
            bad += 1
            x, y = i % rw, i // rw
            x1, y1, x2, y2 = min(x1, x), min(y1, y), max(x2, x), max(y2, y)
            if diff is not None:
                diff[j:j + 3] = b"\xff\x00\x00"
        elif diff is not None:
            g = (twin[j] + twin[j + 1] + twin[j + 2]) // 3
            g = 128 + g // 2
            diff[j:j + 3] = bytes((g, g, g))
    if diff is not None:
        os.makedirs(os.path.dirname(diff_path), exist_ok=True)
        write_png(diff_path, rw, rh, diff)
    pct = 100.0 * bad / n
    bbox = f"({x1},{y1})-({x2},{y2})" if bad else "-"
    return pct, bbox


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", default="/tmp/lvgl-host/out")
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--twin", default=os.path.join(here, "..", "..", "tests", "golden", "screen"))
    ap.add_argument("--diff", nargs="?", const="/tmp/lvgl-host/diff", default=None,
                    help="write diff PNGs (default dir /tmp/lvgl-host/diff when given without a value)")
    ap.add_argument("--max", type=float, default=0.5, help="max %% of differing pixels per picture")
    ap.add_argument("--tol", type=int, default=8, help="per-channel tolerance in levels")
    ap.add_argument("--modes", default="assets,builtin")
    args = ap.parse_args()

    failed = 0
    compared = 0
    print(f"{'mode':8} {'picture':28} {'differ %':>9}  bbox of differing pixels")
    for mode in args.modes.split(","):
        d = os.path.join(args.ref, mode)
        if not os.path.isdir(d):
            print(f"{mode:8} (no reference dir {d})")
            continue
        for name in sorted(os.listdir(d)):
            if not name.endswith(".png"):
                continue
            # The twin's goldens of a board without assets are named `lcd-WxH-builtin-<state>`.
            twin_name = name if mode == "assets" else name.replace("-", "-builtin-", 2).replace("-builtin-", "-", 1)
            twin = os.path.join(args.twin, twin_name)
            if not os.path.exists(twin):
                print(f"{mode:8} {name:28} {'-':>9}  (no twin picture)")
                continue
            diff_path = os.path.join(args.diff, mode, name) if args.diff else None
            pct, bbox = compare(os.path.join(d, name), twin, args.tol, diff_path)
            compared += 1
            if pct is None:
                print(f"{mode:8} {name:28} {'FAIL':>9}  {bbox}")
                failed += 1
                continue
            flag = "  FAIL" if pct > args.max else ""
            failed += pct > args.max
            print(f"{mode:8} {name:28} {pct:8.2f}%  {bbox}{flag}")
    print(f"{compared} compared, {failed} above {args.max}%")
    return 1 if failed or compared == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
