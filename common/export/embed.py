#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# Writes a C header that holds a file as a constant: a string for text,
# an array of bytes with --bytes (for a compiled BPF object).
# Usage: embed.py [--bytes] NAME INPUT OUTPUT
import sys

args = sys.argv[1:]
if args[0] == "--bytes":
    name, src, dst = args[1:4]
    data = open(src, "rb").read()
    with open(dst, "w") as f:
        f.write("/* Generated from %s by embed.py. */\n" % src.split("/")[-1])
        f.write("static const unsigned char %s[] = {\n" % name)
        for i in range(0, len(data), 16):
            f.write("  " + ", ".join("0x%02x" % c for c in data[i:i + 16]) + ",\n")
        f.write("};\n")
    sys.exit(0)
name, src, dst = args[0:3]
data = open(src, "rb").read()
lines = []
for chunk in data.split(b"\n"):
    s = "".join(chr(c) if 32 <= c < 127 and c not in (34, 92, 63) else "\\%03o" % c for c in chunk)
    lines.append('"%s\\n"' % s)
with open(dst, "w") as f:
    f.write("/* Generated from %s by embed.py. */\n" % src.split("/")[-1])
    f.write("static const char %s[] =\n%s;\n" % (name, "\n".join(lines)))
