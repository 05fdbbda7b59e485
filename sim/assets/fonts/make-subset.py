#!/usr/bin/env python3
"""Makes sim/assets/fonts/NotoSansSC-subset.otf, the font the screen renderer draws with.

Noto Sans CJK SC Regular (SIL Open Font License 1.1, see OFL.txt) cut down to the characters a
xiaozhi screen shows in practice: printable ASCII, Latin-1 punctuation, general punctuation,
CJK symbols and punctuation, full-width forms, and the 3,755 hanzi of GB 2312 level 1 (plus
level 2: 3,008 more), the character set of the firmware's Chinese strings and of everyday
sentences. Upstream 2.4.2 draws with a Noto Sans "basic" font (main/CMakeLists.txt,
BUILTIN_TEXT_FONT); its exact character list lives in a component the twin does not read.

Run from the repository root with fontTools installed and the Debian package fonts-noto-cjk
(or give the .ttc path):  python3 sim/assets/fonts/make-subset.py [NotoSansCJK-Regular.ttc]
"""
import sys
from fontTools import subset
from fontTools.ttLib import TTCollection

src = sys.argv[1] if len(sys.argv) > 1 else "/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc"
coll = TTCollection(src)
font = next(f for f in coll.fonts if f["name"].getDebugName(4) == "Noto Sans CJK SC")

chars = set(range(0x20, 0x7F)) | set(range(0xA0, 0x100)) | set(range(0x2000, 0x2070))
chars |= set(range(0x3000, 0x3040)) | set(range(0xFF00, 0xFFF0))
for hi in range(0xB0, 0xF8):
    for lo in range(0xA1, 0xFF):
        try:
            chars.add(ord(bytes([hi, lo]).decode("gb2312")))
        except UnicodeDecodeError:
            pass

options = subset.Options()
options.layout_features = []
options.hinting = False
options.desubroutinize = True
options.name_IDs = ["*"]
options.notdef_outline = True
sub = subset.Subsetter(options)
sub.populate(unicodes=sorted(chars))
sub.subset(font)
font.recalcTimestamp = False
font.save("sim/assets/fonts/NotoSansSC-subset.otf")
print(f"{len(chars)} characters requested, {len(font.getGlyphOrder())} glyphs kept")
