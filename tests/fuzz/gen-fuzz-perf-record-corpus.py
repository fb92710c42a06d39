#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0-or-later
"""Writes the seed corpus of fuzz-perf-record: valid records of every type
perf_record_decode() knows (layouts from include/uapi/linux/perf_event.h,
sample_type = PERFSNAP_SAMPLE_TYPE, sample_id_all) and malformed variants,
each either as a single record (mode byte 0) or as a ring-buffer stream
(mode byte 1, then a start byte: offset (b >> 1) * 32, plus 4 if b & 1).

Usage: gen-fuzz-perf-record-corpus.py [OUTDIR]
"""
import os
import struct
import sys

SAMPLE, MMAP2, COMM, FORK, EXIT = 9, 10, 3, 7, 4
LOST, LOST_SAMPLES, KSYMBOL, BPF_EVENT, THROTTLE = 2, 13, 17, 18, 5
MISC_KERNEL, MISC_USER = 1, 2
MISC_COMM_EXEC = 1 << 13
MISC_MMAP_BUILD_ID = 1 << 14
CTX_KERNEL = (1 << 64) - 128
CTX_USER = (1 << 64) - 512


def rec(rtype, misc, body, size=None):
    n = 8 + len(body)
    return struct.pack("<IHH", rtype, misc, n if size is None else size) + body


def sid(pid=100, tid=100, time=10**9, cpu=1, ident=0x77):
    return struct.pack("<IIQIIQ", pid, tid, time, cpu, 0, ident)


def cstr(s):
    b = s.encode() + b"\0"
    return b + b"\0" * (-len(b) % 8)


def sample(chain, misc=MISC_KERNEL, nr=None):
    body = struct.pack("<QQIIQIIQQ", 0x77, chain[0] if chain else 0, 100, 101,
                       10**9, 1, 0, 1001, len(chain) if nr is None else nr)
    body += b"".join(struct.pack("<Q", ip) for ip in chain)
    return rec(SAMPLE, misc, body)


def mmap2(name, build_id=None, bid_size=20):
    body = struct.pack("<IIQQQ", 100, 100, 0x7f0000000000, 0x1000, 0)
    if build_id is None:
        body += struct.pack("<IIQQ", 8, 1, 1234, 0)
        misc = MISC_USER
    else:
        body += struct.pack("<BBH", bid_size, 0, 0) + build_id
        misc = MISC_USER | MISC_MMAP_BUILD_ID
    body += struct.pack("<II", 5, 2) + cstr(name) + sid()
    return rec(MMAP2, misc, body)


def seeds():
    chain = [CTX_KERNEL, 0xffffffff81001000, 0xffffffff81002000, CTX_USER, 0x401000]
    s = {}
    s["sample"] = sample(chain)
    s["sample-user"] = sample([CTX_USER, 0x401000, 0x402000], misc=MISC_USER)
    s["sample-empty-chain"] = sample([])
    s["sample-nr-too-big"] = sample(chain, nr=1000)
    s["sample-nr-huge"] = sample(chain, nr=(1 << 64) - 1)
    s["sample-truncated"] = sample(chain)[:-8]
    s["comm-exec"] = rec(COMM, MISC_COMM_EXEC, struct.pack("<II", 100, 100) + cstr("true") + sid())
    s["comm-unterminated"] = rec(COMM, 0, struct.pack("<II", 100, 100) + b"abcdefgh" + sid())
    s["fork"] = rec(FORK, 0, struct.pack("<IIIIQ", 101, 100, 101, 100, 10**9) + sid())
    s["exit-short"] = rec(EXIT, 0, struct.pack("<IIII", 101, 100, 101, 100) + sid())
    s["mmap2-inode"] = mmap2("/usr/lib/libc.so.6")
    s["mmap2-build-id"] = mmap2("/usr/bin/true", bytes(range(0xa0, 0xb4)))
    s["mmap2-build-id-size-bad"] = mmap2("/usr/bin/true", bytes(20), bid_size=200)
    s["lost"] = rec(LOST, 0, struct.pack("<QQ", 0x77, 12) + sid())
    s["lost-samples"] = rec(LOST_SAMPLES, 0, struct.pack("<Q", 12) + sid())
    s["ksymbol"] = rec(KSYMBOL, MISC_KERNEL,
                       struct.pack("<QIHH", 0xffffffffc0001000, 0x200, 1, 0) + cstr("bpf_prog_abc_f") + sid())
    s["bpf-event"] = rec(BPF_EVENT, 0, struct.pack("<HHI", 1, 0, 42) + bytes(range(8)) + sid())
    s["throttle-unknown"] = rec(THROTTLE, 0, struct.pack("<QQQ", 1, 2, 3) + sid())
    s["header-size-0"] = rec(COMM, 0, struct.pack("<II", 1, 1) + cstr("x") + sid(), size=0)
    s["header-size-oversized"] = rec(COMM, 0, struct.pack("<II", 1, 1) + cstr("x") + sid(), size=4096)
    s["header-only"] = rec(SAMPLE, 0, b"")
    return s


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "corpus", "fuzz-perf-record")
    os.makedirs(out, exist_ok=True)
    s = seeds()
    for name, data in s.items():
        with open(os.path.join(out, "rec-" + name), "wb") as f:
            f.write(b"\0" + data)
    # Streams: a realistic mix, starting so that records wrap the 4 KiB ring.
    mix = (s["fork"] + s["comm-exec"] + s["mmap2-build-id"] + s["sample"] +
           s["mmap2-inode"] + s["sample-user"] + s["lost"] + s["ksymbol"] +
           s["bpf-event"] + s["throttle-unknown"])
    streams = {
        "mix-start0": (0, mix),
        "mix-wrapping": (4000, mix),            # 96 bytes before the end
        "mix-misaligned": (4004, mix),
        "corrupt-middle": (4064, s["sample"] + s["header-size-0"] + s["sample"]),
        "partial-header": (0, s["sample"] + b"\x09\x00"),
        "oversized": (0, s["header-size-oversized"]),
    }
    for name, (start, data) in streams.items():
        b = (start // 32) << 1 | (1 if start % 32 == 4 else 0)
        assert (b >> 1) * 32 + (b & 1) * 4 == start
        with open(os.path.join(out, "ring-" + name), "wb") as f:
            f.write(b"\1" + bytes([b]) + data)
    return 0


if __name__ == "__main__":
    sys.exit(main())
