#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
# Writes a C header that holds a text file as a string constant.
# Usage: embed.py NAME INPUT OUTPUT
import sys

name, src, dst = sys.argv[1:4]
data = open(src, "rb").read()
lines = []
for chunk in data.split(b"\n"):
    s = "".join(chr(c) if 32 <= c < 127 and c not in (34, 92, 63) else "\\%03o" % c for c in chunk)
    lines.append('"%s\\n"' % s)
with open(dst, "w") as f:
    f.write("/* Generated from %s by client/embed.py. */\n" % src.split("/")[-1])
    f.write("static const char %s[] =\n%s;\n" % (name, "\n".join(lines)))
