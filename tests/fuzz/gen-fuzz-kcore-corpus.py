#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Writes the seed corpus of fuzz-kcore: small kcore-like ET_CORE files
(Elf64_Ehdr and Elf64_Phdr from <elf.h>, little-endian) with executable and
other PT_LOADs around the fuzzer's fixed wanted ranges (text at
0xffffffff81000000, modules at 0xffffffffc0000000, 64 KiB each), malformed
variants, and kallsyms-like text for kcore_want_from_text(). The fuzzer
reads a second wanted range from each input's last 32 bytes: four u64,
text start and length, modules start and length (lengths masked to 1 MiB).

Usage: gen-fuzz-kcore-corpus.py [OUTDIR]
"""
import os
import struct
import sys

PT_LOAD, PT_NOTE = 1, 4
PF_X, PF_W, PF_R = 1, 2, 4
RX, RW, RWX = PF_R | PF_X, PF_R | PF_W, PF_R | PF_W | PF_X
ET_CORE, EM_X86_64 = 4, 62
TEXT = 0xffffffff81000000
MODS = 0xffffffffc0000000
NO_PADDR = (1 << 64) - 1


def ehdr(phnum, cls=2, data=1, etype=ET_CORE, phoff=64, phentsize=56):
    ident = b"\x7fELF" + bytes([cls, data, 1, 0]) + b"\0" * 8
    return ident + struct.pack("<HHIQQQIHHHHHH", etype, EM_X86_64, 1, 0, phoff, 0, 0,
                               64, phentsize, phnum, 0, 0, 0)


def phdr(ptype, flags, offset, vaddr, paddr, filesz, memsz):
    return struct.pack("<IIQQQQQQ", ptype, flags, offset, vaddr, paddr, filesz, memsz, 4096)


def pattern(addr, n):
    return bytes(((addr + i) * 0x9e3779b97f4a7c15 >> 56) & 0xff for i in range(n))


def core(segs, want=None):
    """segs: (type, flags, vaddr, paddr, filesz, memsz[, offset]). Data of
    segments without an explicit offset follows the headers in order."""
    out = bytearray(ehdr(len(segs)))
    data_off = 64 + 56 * len(segs)
    blobs = []
    for s in segs:
        ptype, flags, vaddr, paddr, filesz, memsz = s[:6]
        if len(s) > 6:
            off = s[6]
        else:
            off = data_off
            blobs.append(pattern(vaddr, filesz))
            data_off += filesz
        out += phdr(ptype, flags, off, vaddr, paddr, filesz, memsz)
    for b in blobs:
        out += b
    if want is not None:
        out += struct.pack("<QQQQ", *want)
    return bytes(out)


def seeds():
    s = {}
    s["mixed"] = core([
        (PT_NOTE, 0, 0, 0, 0, 0, 0),
        (PT_LOAD, RX, TEXT, 0x1000000, 0x300, 0x300),
        (PT_LOAD, RW, TEXT + 0x300, 0x1000300, 0x100, 0x100),
        (PT_LOAD, RX, TEXT + 0x1000, 0x1001000, 0x80, 0x2000),
        (PT_LOAD, RWX, MODS + 0x10, NO_PADDR, 0x200, 0x200),
        (PT_LOAD, RX, MODS + 0x210, NO_PADDR, 0x100, 0x100),
        (PT_LOAD, RWX, 0xffff888000000000, 0, 0x40, 0x40),
    ], want=(TEXT + 0x100, 0x1000, MODS, 0x300))
    s["overlapping"] = core([
        (PT_LOAD, RX, TEXT, 0x1000000, 0x200, 0x200),
        (PT_LOAD, RWX, TEXT + 0x100, 0x1000100, 0x200, 0x200),
        (PT_LOAD, RX, TEXT + 0x80, 0x1000080, 0x40, 0x40),
    ], want=(TEXT, 0x180, TEXT + 0x100, 0x400))
    s["nothing-wanted"] = core([
        (PT_LOAD, RW, TEXT, 0x1000000, 0x100, 0x100),
        (PT_LOAD, RX, 0xffff888000000000, 0, 0x100, 0x100),
    ], want=(0, 0, 0, 0))
    s["huge-offset"] = core([
        (PT_LOAD, RWX, TEXT, 0x1000000, 0x1000, 0x1000, 1 << 47),
        (PT_LOAD, RX, MODS, NO_PADDR, 0x40, 0x40),
    ])
    s["offset-overflow"] = core([
        (PT_LOAD, RX, TEXT, 0, 0x1000, 0x1000, (1 << 64) - 0x800),
    ])
    s["vaddr-wraps"] = core([
        (PT_LOAD, RX, (1 << 64) - 0x100, 0, 0x200, 0x200, 0x1000),
    ], want=((1 << 64) - 0x1000, 0xfffff, 0, 0))
    s["phdrs-truncated"] = core([(PT_LOAD, RX, TEXT, 0, 0x100, 0x100)])[:64 + 30]
    s["ehdr-truncated"] = ehdr(1)[:40]
    s["class32"] = ehdr(1, cls=1) + phdr(PT_LOAD, RX, 0x100, TEXT, 0, 0x10, 0x10)
    s["big-endian"] = ehdr(1, data=2) + phdr(PT_LOAD, RX, 0x100, TEXT, 0, 0x10, 0x10)
    s["not-core"] = ehdr(1, etype=2) + phdr(PT_LOAD, RX, 0x78, TEXT, 0, 0x10, 0x10) + b"\xcc" * 16
    s["phnum-huge"] = ehdr(0xffff) + phdr(PT_LOAD, RX, 0x78, TEXT, 0, 0x10, 0x10)
    s["phentsize-bad"] = ehdr(1, phentsize=32) + phdr(PT_LOAD, RX, 0x78, TEXT, 0, 0x10, 0x10)
    s["kallsyms-modules.txt"] = (
        b"ffffffff81000000 T _stext\n"
        b"ffffffff81000d32 T _etext\n"
        b"ffffffffc0000100 t brd_probe\t[brd]\n"
        b"ffffffffc0003000 t bpf_prog_1234_x\t[bpf]\n"
        b"brd 20480 0 - Live 0xffffffffc0000000\n")
    # _stext below the first page rounds down to address 0.
    s["stext-in-page-0.txt"] = (
        b"00000000000000a0 T _stext\n"
        b"0000000000001000 T _etext\n"
        b"m 4096 0 - Live 0x0000000000000800\n"
        b"0000000000000900 t f\t[m]\n")
    s["empty"] = b""
    return s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz-kcore")
    os.makedirs(out, exist_ok=True)
    for name, data in seeds().items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
