#!/usr/bin/env python3
"""Makes the twin's copy of the firmware's glyph data (issue 41).

The firmware draws its screen with the fonts and emoji of the ESP component `78/xiaozhi-fonts`
2.0.0 (upstream's main/idf_component.yml pins `~2.0.0`; source repository 78/noto-fonts, commit
d45dbc64052d57048f20ab1770074172ce9eb53b). This script reads an unpacked copy of that component
and writes, beside itself:

* `fonts/<name>.bin`: every font the firmware's builds use, in the component's own `cbin`
  layout (the one `cbin_font_create` reads: an `lv_font_t` and an `lv_font_fmt_txt_dsc_t` as laid
  out on a 32-bit target, offsets in place of pointers). The `common` text fonts are copied as the
  component ships them; the built-in fonts (`basic` text, Material Symbols icons, monochrome Noto
  Emoji), which the component ships as LVGL C sources, are converted to the same layout, so the
  twin reads one format. No glyph, metric or bitmap byte is changed.
* `emoji/noto-color-emoji_<size>/<emotion>.png`: the colour emoji collections, as shipped.

Every file read is first checked against the component's CHECKSUMS.json, so the output is known
to come from the published 2.0.0 component.

usage: make.py <path to the unpacked 78__xiaozhi-fonts component>
"""

import hashlib
import json
import re
import shutil
import struct
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

# The fonts the firmware's builds use (main/CMakeLists.txt's BUILTIN_TEXT_FONT /
# BUILTIN_ICON_FONT, lcd_display.cc and oled_display.cc's large icon and emoji fonts, and the
# `common` text font the default assets carry for each built-in size).
C_FONTS = [
    "font_noto_sans_basic_14_1",
    "font_noto_sans_basic_16_4",
    "font_noto_sans_basic_20_4",
    "font_noto_sans_basic_30_4",
    "font_material_symbols_14_1",
    "font_material_symbols_16_4",
    "font_material_symbols_20_4",
    "font_material_symbols_30_1",
    "font_material_symbols_30_4",
    "font_noto_emoji_30_1",
    "font_noto_emoji_30_4",
]
CBIN_FONTS = [
    "font_noto_sans_common_14_1",
    "font_noto_sans_common_16_4",
    "font_noto_sans_common_20_4",
    "font_noto_sans_common_30_4",
]
EMOJI_SIZES = [32, 64, 128]

CMAP_TYPES = {
    "LV_FONT_FMT_TXT_CMAP_FORMAT0_FULL": 0,
    "LV_FONT_FMT_TXT_CMAP_SPARSE_FULL": 1,
    "LV_FONT_FMT_TXT_CMAP_FORMAT0_TINY": 2,
    "LV_FONT_FMT_TXT_CMAP_SPARSE_TINY": 3,
}


def checked(component: Path, rel: str, sums: dict) -> bytes:
    data = (component / rel).read_bytes()
    want = sums.get(rel)
    if want is None:
        sys.exit(f"{rel}: not in the component's CHECKSUMS.json")
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        sys.exit(f"{rel}: sha256 {got}, CHECKSUMS.json says {want}: not the published component")
    return data


def array(src: str, name: str) -> str:
    m = re.search(r"\b" + re.escape(name) + r"\[\]\s*=\s*\{(.*?)\};", src, re.S)
    if not m:
        sys.exit(f"no array {name}")
    return m.group(1)


def numbers(body: str) -> list[int]:
    return [int(t, 0) for t in re.findall(r"-?(?:0x[0-9a-fA-F]+|\d+)", body)]


def field(body: str, name: str) -> str:
    m = re.search(r"\." + name + r"\s*=\s*([^,\n}]+)", body)
    if not m:
        sys.exit(f"no field .{name}")
    return m.group(1).strip()


def convert(src: str) -> bytes:
    """An LVGL C font (lv_font_conv's output) as a cbin."""
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    bitmap = bytes(numbers(array(src, "glyph_bitmap")))
    glyphs = []
    for entry in re.findall(r"\{([^{}]*\.bitmap_index[^{}]*)\}", array(src, "glyph_dsc")):
        glyphs.append([int(field(entry, k), 0) for k in
                       ("bitmap_index", "adv_w", "box_w", "box_h", "ofs_x", "ofs_y")])
    font_dsc = re.search(r"lv_font_fmt_txt_dsc_t font_dsc = \{(.*?)\};", src, re.S).group(1)
    cmap_num = int(field(font_dsc, "cmap_num"))
    bpp = int(field(font_dsc, "bpp"))
    kern_classes = int(field(font_dsc, "kern_classes"))
    kern_scale = int(field(font_dsc, "kern_scale"))
    bitmap_format = int(field(font_dsc, "bitmap_format"))
    kern_dsc = field(font_dsc, "kern_dsc")
    font = re.search(r"lv_font_t \w+ = \{(.*?)\};", src, re.S).group(1)
    line_height = int(field(font, "line_height"))
    base_line = int(field(font, "base_line"))
    ul_pos = int(field(font, "underline_position"))
    ul_thick = int(field(font, "underline_thickness"))

    # The cmaps, with their lists appended after the records (offsets from the records' start).
    cmap_entries = re.findall(r"\{([^{}]*\.range_start[^{}]*)\}", array(src, "cmaps"))
    if len(cmap_entries) != cmap_num:
        sys.exit(f"{len(cmap_entries)} cmaps, font_dsc says {cmap_num}")
    records = bytearray()
    lists = bytearray()
    lists_at = 20 * cmap_num
    for entry in cmap_entries:
        offsets = []
        for key, fmt in (("unicode_list", "<H"), ("glyph_id_ofs_list", None)):
            name = field(entry, key)
            if name == "NULL":
                offsets.append(0)
                continue
            values = numbers(array(src, name))
            kind = CMAP_TYPES[field(entry, "type")]
            # format0 full's offsets are uint8; sparse full's are uint16 (lv_font_fmt_txt.h)
            item = fmt or ("<B" if kind == 0 else "<H")
            while len(lists) % 4:
                lists.append(0)
            offsets.append(lists_at + len(lists))
            for v in values:
                lists += struct.pack(item, v)
        records += struct.pack(
            "<IHHIIHBB",
            int(field(entry, "range_start")),
            int(field(entry, "range_length")),
            int(field(entry, "glyph_id_start")),
            offsets[0],
            offsets[1],
            int(field(entry, "list_length")),
            CMAP_TYPES[field(entry, "type")],
            0,
        )
    cmaps = bytes(records + lists)

    kern = b""
    if kern_dsc != "NULL":
        if kern_classes != 1:
            sys.exit("kerning by pairs: not used by the firmware's fonts, not converted")
        classes = re.search(r"kern_classes =\s*\{(.*?)\};", src, re.S).group(1)
        left = bytes(numbers(array(src, "kern_left_class_mapping")))
        right = bytes(numbers(array(src, "kern_right_class_mapping")))
        values = struct.pack(f"<{len(numbers(array(src, 'kern_class_values')))}b",
                             *numbers(array(src, "kern_class_values")))
        head = 16
        kern = struct.pack("<IIIBBH", head, head + len(values), head + len(values) + len(left),
                           int(field(classes, "left_class_cnt")),
                           int(field(classes, "right_class_cnt")), 0)
        kern += values + left + right

    glyph_table = b"".join(struct.pack("<IIHHhh", *g) for g in glyphs)

    def pad(b: bytes) -> bytes:
        return b + b"\0" * (-len(b) % 4)

    # dsc (24 bytes), then the bitmaps, glyphs, cmaps and kerning, each 4-aligned.
    at = 24
    bitmap_at = at
    at += len(pad(bitmap))
    glyph_at = at
    at += len(glyph_table)
    cmap_at = at
    at += len(pad(cmaps))
    kern_at = at if kern else 0
    flags = cmap_num | (bpp << 9) | (kern_classes << 13) | (bitmap_format << 14)
    dsc = struct.pack("<IIIIHHI", bitmap_at, glyph_at, cmap_at, kern_at, kern_scale, flags, 0)
    body = dsc + pad(bitmap) + glyph_table + pad(cmaps) + kern
    # lv_font_t: three function pointers, line_height, base_line, the bit fields (kerning on),
    # underline position and thickness, dsc, fallback, user_data.
    head = struct.pack("<IIIiiBbbxIII", 0, 0, 0, line_height, base_line, 0, ul_pos, ul_thick,
                       36, 0, 0)
    assert len(head) == 36
    return head + body


def main() -> None:
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    component = Path(sys.argv[1])
    sums = {f["path"]: f["hash"] for f in json.loads((component / "CHECKSUMS.json").read_text())["files"]}
    fonts = HERE / "fonts"
    fonts.mkdir(exist_ok=True)
    for name in C_FONTS:
        src = checked(component, f"src/{name}.c", sums).decode("utf-8")
        (fonts / f"{name}.bin").write_bytes(convert(src))
    for name in CBIN_FONTS:
        (fonts / f"{name}.bin").write_bytes(checked(component, f"cbin/{name}.bin", sums))
    for size in EMOJI_SIZES:
        out = HERE / "emoji" / f"noto-color-emoji_{size}"
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        for png in sorted((component / "png" / f"noto-color-emoji_{size}").glob("*.png")):
            rel = f"png/noto-color-emoji_{size}/{png.name}"
            (out / png.name).write_bytes(checked(component, rel, sums))
    (HERE / "mappings").mkdir(exist_ok=True)
    for rel in ("mappings/emoji.json", "mappings/material_symbols.json"):
        (HERE / rel).write_bytes(checked(component, rel, sums))


if __name__ == "__main__":
    main()
