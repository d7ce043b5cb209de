#!/usr/bin/python3
"""Where a job's peers ended, against the job's own average model.

Usage: ckpt_average.py [--out FILE.gdc] CKPT.gdc...

Reads gossipd checkpoints of the built-in MLP (include/gossipd/ckpt_format.h,
layout src/model.h), averages their parameters and prints, on the whole
Fashion-MNIST test set, each checkpoint's accuracy and its distance to the
average (relative L2: ||x_p - mean|| / ||mean||), then the average model's
accuracy. On skewed shards the average can score well above the peers,
which then disagree: that gap is what a consensus phase has to close
(issue 14). --out writes the average as a checkpoint (zero momentum, its
checksum computed) that gossipd --resume or this tool can read.
Needs numpy; gossip_report.py imports it for its summary.
"""
import argparse
import gzip
import hashlib
import os
import struct
import sys

import numpy as np

DATA = "/usr/share/datasets/fashion-mnist"
MEAN, STD = 0.2860, 0.3530
MAGIC = b"GDCKPT\r\n"
HEADER_SIZE = 128
MAX_LAYERS = 8


def load_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    ndim = raw[3]
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


_test = None


def test_set():
    global _test
    if _test is None:
        x = load_idx(os.path.join(DATA, "t10k-images-idx3-ubyte.gz"))
        y = load_idx(os.path.join(DATA, "t10k-labels-idx1-ubyte.gz"))
        x = (x.reshape(len(x), -1).astype(np.float32) / 255.0 - MEAN) / STD
        _test = (x, y.astype(np.int64))
    return _test


def read_ckpt(path):
    """(header bytes, layer sizes, step, parameters) of a checkpoint."""
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:8] != MAGIC:
        raise ValueError("%s: not a checkpoint" % path)
    _version, hsize, nl = struct.unpack_from("<III", raw, 8)
    sizes = struct.unpack_from("<%dI" % (MAX_LAYERS + 1), raw, 20)[:nl + 1]
    d, step = struct.unpack_from("<QQ", raw, 56)
    x = np.frombuffer(raw, dtype="<f4", count=d, offset=hsize).astype(np.float64)
    return raw[:hsize], sizes, step, x


def mlp_accuracy(sizes, x):
    """Accuracy on the whole test set of the MLP with these layer sizes."""
    if len(sizes) < 2:
        raise ValueError("a flat vector (external trainer): no built-in model to evaluate")
    h, y = test_set()
    off = 0
    for l in range(len(sizes) - 1):
        a, b = sizes[l], sizes[l + 1]
        w = x[off:off + a * b].reshape(a, b)
        off += a * b
        h = h @ w + x[off:off + b]
        off += b
        if l < len(sizes) - 2:
            h = np.maximum(h, 0)
    if off != len(x):
        raise ValueError("%d parameters, layers say %d" % (len(x), off))
    return float((h.argmax(1) == y).mean())


def ckpt_accuracy(path):
    """(step, accuracy on the whole test set) of a gossipd checkpoint."""
    _, sizes, step, x = read_ckpt(path)
    return step, mlp_accuracy(sizes, x)


def average(paths):
    """Each checkpoint's accuracy and distance to the average, and the
    average's accuracy: {"peers": [(path, acc, dist)], "avg_acc": a}."""
    ck = [read_ckpt(p) for p in paths]
    sizes = ck[0][1]
    if any(c[1] != sizes for c in ck):
        raise ValueError("checkpoints of different models")
    mean = np.mean([c[3] for c in ck], axis=0)
    norm = np.linalg.norm(mean)
    peers = [(p, mlp_accuracy(sizes, c[3]), float(np.linalg.norm(c[3] - mean) / norm))
             for p, c in zip(paths, ck)]
    return {"peers": peers, "avg_acc": mlp_accuracy(sizes, mean), "mean": mean,
            "header": ck[0][0], "step": max(c[2] for c in ck)}


def write_ckpt(path, header, step, x):
    """x as a checkpoint with header's model and seed, zero momentum."""
    h = bytearray(header)
    struct.pack_into("<Q", h, 64, step)
    x32 = x.astype("<f4").tobytes()
    body = bytes(h) + x32 + bytes(len(x32))
    with open(path, "wb") as f:
        f.write(body + hashlib.blake2b(body, digest_size=32).digest())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write the average model as a checkpoint")
    ap.add_argument("ckpts", nargs="+")
    a = ap.parse_args()
    try:
        r = average(a.ckpts)
    except (OSError, ValueError) as e:
        print("ckpt_average: %s" % e, file=sys.stderr)
        return 2
    print("%-50s %9s %9s" % ("checkpoint", "accuracy", "distance"))
    for p, acc, dist in r["peers"]:
        print("%-50s %9.4f %9.4f" % (p, acc, dist))
    print("%-50s %9.4f" % ("average of %d" % len(a.ckpts), r["avg_acc"]))
    if a.out:
        write_ckpt(a.out, r["header"], r["step"], r["mean"])
        print("wrote %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
