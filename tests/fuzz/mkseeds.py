#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (tests/fuzz/corpus/NAME/seed-*)
from valid inputs, in each target's input layout (see the comment at the top
of fuzz_NAME.c). Run from anywhere: python3 tests/fuzz/mkseeds.py"""
import hashlib
import os
import struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
JOB = 0x1122334455667788
WIRE_VERSION = 5  # wire.h
CHUNK = 1 << 20  # WIRE_CHUNK_SIZE


def put(name, seed, data):
    d = os.path.join(ROOT, name)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + seed), "wb") as f:
        f.write(data)


def header(typ, flags, payload_len, seq=1, chunks=0, job=JOB):
    return struct.pack("<4sBBHQQQQQII", b"GSPD", WIRE_VERSION, typ, flags, job, 1, 2, seq,
                       payload_len, 0, chunks)


def hello(addr=b"10.0.0.1:1"):
    # kx pk, stamp, held session's stamp, address length, AEAD suites
    # offered (aead.h), address
    return bytes(range(32)) + struct.pack("<QQBB", 12345, 0, len(addr), 7) + addr


# wire: selector byte, then a frame.
h = hello()
put("wire", "hello", b"\x00" + header(1, 1, len(h)) + h + b"\x00" * 16)
put("wire", "ack", b"\x00" + header(3, 1, 8) + struct.pack("<Q", 9) + b"\x00" * 16)
put("wire", "app-inline", b"\x00" + header(64, 1, 4) + b"abcd" + b"\x00" * 16)
put("wire", "app-body", b"\x01" + header(80, 0, 2 * CHUNK + 1, chunks=3) + b"\x00" * 16)
put("wire", "other-job", b"\x02" + header(65, 1, 0, job=7) + b"\x00" * 16)

# session: mode byte, then as fuzz_session.c says.
put("session", "raw-hello", b"\x00" + header(1, 1, len(h)) + h + b"\x00" * 16)
put("session", "raw-message", b"\x01" + header(70, 1, 5, seq=3) + b"hello" + b"\x00" * 16)
put("session", "handshake", b"\x02\x00")
put("session", "handshake-edit", b"\x02\x01" + struct.pack("<HB", 60, 1))
put("session", "message", b"\x03\x05" + struct.pack("<H", 6) + b"gossip")
put("session", "message-edit", b"\x03\x05" + struct.pack("<H", 3) + b"abc" +
    struct.pack("<HB", 40, 0x80))

# control: what a client writes.
put("control", "status", b'{"cmd":"status"}\n')
put("control", "many", b'{"cmd":"status"}\n{"cmd":"stats"}\r\n{"cmd":"peers"}\n'
    b'{"cmd":"set","key":"density","value":"0.05"}\n{"cmd":"watch"}\n'
    b'{"cmd":"checkpoint"}\n')
put("control", "metrics", b'{"cmd":"metrics"}\n' * 2)
put("control", "errors", b'not json\n[1]\n{"cmd":1}\n{"cmd":"nope"}\n\n{"cmd":"set"}\n')
put("control", "partial", b'{"cmd":"status"}\n{"cmd":"sta')

# config: INI text, NUL, first call's argv, empty arg, second call's argv.
ini = b"job = fuzz\nseed = 3\n[gossipd]\ndensity = 0.5\nmask_block = 8\nmodel = 784-32-10\n"
put("config", "file", ini + b"\x00")
put("config", "argv", b"\x00--job\x00j\x00--density=0.1\x00--mode\x00dense\x00\x00-f\x00")
put("config", "both", ini + b"\x00-f\x00--lr\x000.5\x00\x00--shard\x001/4\x00")
put("config", "help", b"\x00--help\x00\x00--version\x00")

# idx: flags, u16 image file length, image file, label file.
img = struct.pack(">IIII", 0x803, 3, 2, 2) + bytes(range(12))
lab = struct.pack(">II", 0x801, 3) + bytes([0, 9, 4])
put("idx", "plain", b"\x00" + struct.pack("<H", len(img)) + img + lab)
put("idx", "gz-shards", b"\x07" + struct.pack("<H", len(img)) + img + lab)
put("idx", "dirichlet", b"\x0a" + struct.pack("<H", len(img)) + img + lab)


def ckpt(sizes, step=10, epoch=1, seed=3):
    d = sum(sizes[i] * sizes[i + 1] + sizes[i + 1] for i in range(len(sizes) - 1))
    hd = bytearray(128)
    hd[0:8] = b"GDCKPT\r\n"
    struct.pack_into("<III", hd, 8, 1, 128, len(sizes) - 1)
    struct.pack_into("<%dI" % len(sizes), hd, 20, *sizes)
    struct.pack_into("<QQQII", hd, 56, d, step, seed, epoch, 0)
    body = bytes(hd) + struct.pack("<%df" % d, *[i * 0.01 for i in range(d)]) + \
        struct.pack("<%df" % d, *[0.0] * d)
    return body + hashlib.blake2b(body, digest_size=32).digest()


put("ckpt", "small", ckpt([3, 5, 3]))
put("ckpt", "deep", ckpt([4, 3, 3, 2], step=99))


# member: records u8 type, u8 sender, u16 length, message, u8 ms/8.
def mmsg(updates, seq=1, flags=0, target=None):
    b = struct.pack("<BBHI", 1, flags, len(updates), seq)
    if target is not None:
        b += bytes([len(target)]) + target
    for state, uid, inc, addr in updates:
        b += struct.pack("<BBQQ", state, len(addr), uid, inc) + addr
    return b


def mrec(typ, sender, msg, dt=10):
    return struct.pack("<BBH", typ - 64, sender, len(msg)) + msg + bytes([dt])


peers = [(0, 2, 5, b"10.0.0.2:2"), (0, 3, 5, b"10.0.0.3:3")]
put("member", "ping-ack", mrec(64, 0, mmsg([], seq=7)) + mrec(65, 1, mmsg(peers, seq=1)))
# A full table as a joiner's SYNC brings it (live, suspect, dead and left
# records), then the news of a busy minute: several state changes at once.
table = [(i % 4, 10 + i, 100 + i, b"10.0.1.%d:%d" % (i, 7000 + i)) for i in range(14)]
put("member", "sync-table", mrec(67, 0, mmsg(table, flags=1)) +
    mrec(68, 1, mmsg([(2, 12, 103, b"10.0.1.2:7002"), (0, 12, 104, b"10.0.1.2:7002"),
                      (1, 13, 104, b"10.0.1.3:7003"), (3, 10, 101, b"10.0.1.0:7000"),
                      (0, 10, 102, b"10.0.1.0:7000")]), dt=1))
# The same kind of news as compact records (fuzz_member.c): member index and
# state, incarnation step.
put("member", "compact", bytes([0x80 | 4, 0, 4, 1 | 0 << 2, 1, 2 | 1 << 2, 1, 3 | 2 << 2, 1,
                                1 | 3 << 2, 2, 5]) + mrec(64, 0, mmsg([], seq=2)))
put("member", "ping-req", mrec(66, 1, mmsg([], seq=4, target=b"10.0.0.4:4")))
put("member", "sync", mrec(67, 2, mmsg(peers + [(0, 9, 1, b"10.0.0.8:8")], flags=1)))
put("member", "gossip", mrec(68, 0, mmsg([(1, 3, 6, b"10.0.0.3:3"),
                                          (2, 4, 6, b"10.0.0.4:4"),
                                          (3, 2, 9, b"10.0.0.2:2")]), dt=255) +
    mrec(64, 0x80, b"") + mrec(68, 0, mmsg([(0, 4, 7, b"10.0.0.4:4")])))


# gossip: flags, then records u8 type, u8 flags, u16 length, message, u8 ms.
def grec(typ, f, msg, dt=1):
    return struct.pack("<BBH", typ - 80, f, len(msg)) + msg + bytes([dt])


def req(count, density=0.5, block=4, d=38, mode=0, fp16=False):
    b = struct.pack("<BBBBIQQQdQ", 1, mode, 1 if fp16 else 0, 0, block, 77, d, count,
                    density, 5)
    return b + (struct.pack("<%de" % count, *[0.5] * count) if fp16 else
                struct.pack("<%df" % count, *[0.5] * count))


def reply(count, status=0):
    return struct.pack("<BBBBIQQQ", 1, status, 0, 0, 0, 0, count, 5) + \
        struct.pack("<%df" % count, *[0.25] * count)


put("gossip", "req", b"\x00" + grec(80, 0, req(19)))
put("gossip", "req-fp16", b"\x00" + grec(80, 1, req(19, fp16=True)))
put("gossip", "req-dense", b"\x02" + grec(80, 0, req(38, mode=1)))
put("gossip", "reply", b"\x01" + grec(81, 2, reply(19)))
put("gossip", "reply-busy", b"\x01" + grec(81, 2, reply(0, status=1)))


def int8(count):
    out = b""
    for b in range(0, count, 64):
        n = min(64, count - b)
        out += struct.pack("<f", 0.5 / 127) + bytes([127]) * n
    return out


# delta: coordinates 0, 1, 5, 37 as varint gaps 0, 0, 3, 31; int8 values.
def req_delta(gaps, values):
    return struct.pack("<BBBBIQQQdQ", 1, 2, 2 if values == "int8" else 0, 0, 0, 77, 38,
                       len(gaps), 0.1, 5) + bytes(gaps) + \
        (int8(len(gaps)) if values == "int8" else struct.pack("<%df" % len(gaps),
                                                                 *[0.5] * len(gaps)))


put("gossip", "req-int8", b"\x00" + grec(80, 0, struct.pack(
    "<BBBBIQQQdQ", 1, 0, 2, 0, 4, 77, 38, 19, 0.5, 5) + int8(19)))
put("gossip", "req-delta", b"\x10" + grec(80, 0, req_delta([0, 0, 3, 31], "fp32")))
put("gossip", "req-delta-int8", b"\x30" + grec(80, 0, req_delta([0, 0, 3, 31], "int8")))


# pull: flags, then records u8 type, u8 flags, u16 length, message, u8 10 ms.
def prec(typ, f, msg, dt=1):
    return struct.pack("<BBH", typ - 82, f, len(msg)) + msg + bytes([dt])


def pull(ident, off, n, fmt=0):
    return struct.pack("<QQQB", ident, off, n, fmt)


# values in fp32 (fmt 0) or int8 (2: per 64 values an f32 scale, then int8)
def chunk(n, status=0, off=0, scale=1.0, fmt=0):
    head = struct.pack("<QQQQiB3x", 0, off, n if status == 0 else 0, 5, status, fmt)
    if status != 0:
        return head
    v = [scale * (i + 1) / n for i in range(n)]
    if fmt == 0:
        return head + struct.pack("<%df" % n, *v)
    out = b""
    for b in range(0, n, 64):
        blk = v[b:b + 64]
        s = max(abs(x) for x in blk) / 127
        out += struct.pack("<f", s) + bytes((round(x / s) & 0xff) for x in blk)
    return head + out


# A donor serves a slice, refuses one past the end, and one too long; then
# a slice in int8 and one in fp16.
put("pull", "serve", b"\x00" + prec(82, 0, pull(1, 0, 38)) +
    prec(82, 1, pull(2, 30, 100)) + prec(82, 3, pull(3, 0, 1 << 20)) +
    prec(82, 0, pull(4, 0, 38, 2)) + prec(82, 1, pull(5, 0, 38, 1)))
# A joiner shown three members: every donor answers its PULL (the id
# patched in), the second with an error; then it serves.
put("pull", "join", b"\x07" + prec(83, 4 | 0, chunk(38)) + prec(83, 4 | 1, chunk(0, -11)) +
    prec(83, 4 | 2, chunk(38, scale=1.1)) + prec(82, 0, pull(1, 0, 38)))
# The same joiner asking for int8 (flags bits 3-4 = 2): two donors answer
# in it, the third in fp32, which it did not ask for.
put("pull", "join-int8", b"\x17" + prec(83, 4 | 0, chunk(38, fmt=2)) +
    prec(83, 4 | 1, chunk(38, scale=1.1, fmt=2)) + prec(83, 4 | 2, chunk(38)) +
    prec(82, 0, pull(1, 0, 38, 2)))
# One member shown, after the donor wait; the daemon refuses the model once.
put("pull", "join-refused", b"\x03" + prec(83, 16, b"", dt=120) + prec(83, 4 | 16, chunk(38)) +
    prec(83, 0, b"", dt=1) + prec(83, 4, chunk(38)))
# A far donor and a non-finite one among three, then a deadline and a donor gone.
put("pull", "poison", b"\x07" + prec(83, 4 | 0, chunk(38)) +
    prec(83, 4 | 1, chunk(38, scale=1e6)) +
    prec(83, 4 | 2, chunk(38)[:40] + struct.pack("<f", float("nan")) + chunk(38)[44:]))
put("pull", "timeout-down", b"\x07" + prec(83, 4 | 0, chunk(38), dt=250) +
    prec(83, 8 | 1, b"") + prec(83, 4 | 2, chunk(38)))


# share: flags, then records u8 type, u8 flags, u16 length, message, u8 ms.
def srec(f, msg, dt=1):
    return struct.pack("<BBH", 0, f, len(msg)) + msg + bytes([dt])


def int2(count):
    out = b""
    for b in range(0, count, 64):
        n = min(64, count - b)
        out += struct.pack("<ff", 0.005, 0.01) + bytes([0xaa]) * ((n + 3) // 4)
    return out


def rice(gaps, k):
    """mask_encode_rice: each gap's g >> k in unary, then its k low bits,
    from each byte's low bit up."""
    bits = []
    for g in gaps:
        bits += [1] * (g >> k) + [0] + [(g >> b) & 1 for b in range(k)]
    bits += [0] * (-len(bits) % 8)
    return bytes(sum(bit << j for j, bit in enumerate(bits[i:i + 8]))
                 for i in range(0, len(bits), 8))


VALUES = {"fp32": (0, lambda n: struct.pack("<%df" % n, *[0.01] * n)), "int8": (2, int8),
          "int2": (3, int2)}


# coordinates 0, 1, 5, 37 (gaps 0, 0, 3, 31) of d = 38; k None: varint
# gaps, else Rice-coded with parameter k
def share(values="fp32", d=38, gaps=(0, 0, 3, 31), n=4, k=None):
    fmt, vals = VALUES[values]
    idx = bytes(gaps) if k is None else rice(gaps, k)
    return struct.pack("<BBHBxxxQQQ", 3, fmt, n, 0 if k is None else k + 1, d, len(gaps),
                       len(idx)) + idx + vals(len(gaps))


# Anchored, through a trust: three members' shares, then a large one.
put("share", "apply", b"\x03" + srec(0, share()) + srec(1, share("int8")) +
    srec(0, share(d=39)))
# After a round of its own (int8): the fallback radius clips a share.
put("share", "round", b"\x0f" + srec(0, share()) + srec(1, share("int8")))
# A sender claiming a job of one member, then of none.
put("share", "weight", b"\x01" + srec(0, share(n=1)) + srec(1, share(n=0)))
# Not anchored: refused; an index past the model.
put("share", "unanchored", b"\x00" + srec(0, share()) + srec(0, share(gaps=(0, 0, 3, 40))))
# Rice-coded indices and int2 values, after a round of its own in int2.
put("share", "rice-int2", b"\x17" + srec(0, share("int2", k=2)) + srec(1, share(k=0)) +
    srec(0, share("int2", k=4, gaps=(0, 0, 3, 40))))
