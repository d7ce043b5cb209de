#!/usr/bin/python3
"""PyTorch DDP baseline for contrib/bench/gossip.sh: one worker process.

The driver starts WORLD of these (--rank 0..WORLD-1) on 127.0.0.1, the way it
starts gossipd peers, so both systems pay the same process start-up and the
driver can kill every process it started. The setting mirrors gossipd's
defaults: MLP 784-256-128-10 (ReLU, softmax cross-entropy), batch 64 per
worker, SGD momentum 0.9, weight decay 5e-4, linear warm-up then cosine over
the worker's own shard epochs, last partial batch dropped, pixels normalised
as (p/255 - 0.2860)/0.3530, one thread per worker, gloo all-reduce.

Each worker evaluates its (identical) model on the first --eval-samples test
images every --eval-every steps, as every gossipd peer does, so measurement
costs the same per process in both systems; rank 0 logs the result.

Bytes: per step DDP all-reduces the gradient once (one bucket: the model is
0.9 MB, under DDP's 25 MB bucket). The analytic count is the ring all-reduce
volume, 2 (n-1)/n * 4 d bytes sent per worker per step. At the end every
worker also reads, with ss(8), the bytes_sent of its own TCP sockets (gloo
pairs and the rendezvous store) as a cross-check of that formula.

Output lines on stdout, one JSON object each, "ev" says which:
  start   (after rendezvous, data and model are ready; t = unix time)
  eval    step, epoch, t, accuracy, loss, bytes (analytic, cumulative)
  done    steps, t, full test set accuracy and loss, bytes analytic and ss
"""
import argparse
import gzip
import json
import math
import os
import re
import subprocess
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.nn as nn

MEAN, STD = 0.2860, 0.3530


def load_idx(path):
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic = int.from_bytes(raw[0:4], "big")
    ndim = magic & 0xFF
    dims = [int.from_bytes(raw[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(raw, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def load(data, kind):
    x = load_idx(os.path.join(data, kind + "-images-idx3-ubyte.gz"))
    y = load_idx(os.path.join(data, kind + "-labels-idx1-ubyte.gz"))
    x = (x.reshape(len(x), -1).astype(np.float32) / 255.0 - MEAN) / STD
    return torch.from_numpy(x), torch.from_numpy(y.astype(np.int64))


def emit(**kw):
    print(json.dumps(kw), flush=True)


def socket_bytes_sent(pid):
    """Sum of bytes_sent over this process's TCP sockets, or -1."""
    try:
        out = subprocess.run(["ss", "-tinpH"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        return -1
    total, mine = 0, False
    for line in out.splitlines():
        if not line.startswith((" ", "\t")):
            mine = ("pid=%d," % pid) in line
            continue
        m = re.search(r"\bbytes_sent:(\d+)", line)
        if mine and m:
            total += int(m.group(1))
    return total


def evaluate(model, x, y):
    model.eval()
    with torch.no_grad():
        out = model(x)
        loss = nn.functional.cross_entropy(out, y).item()
        acc = (out.argmax(1) == y).float().mean().item()
    model.train()
    return acc, loss


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, default=8)
    ap.add_argument("--port", type=int, default=26500)
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--epochs", type=float, default=15)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--warmup-epochs", type=float, default=0.5)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--eval-every", type=int, default=40)
    ap.add_argument("--eval-samples", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    torch.set_num_threads(1)
    torch.manual_seed(a.seed)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port,
                            rank=a.rank, world_size=a.world)
    xtr, ytr = load(a.data, "train")
    xte, yte = load(a.data, "t10k")
    ne = len(xte) if a.eval_samples <= 0 else min(a.eval_samples, len(xte))
    xev, yev = xte[:ne], yte[:ne]
    # iid shard: a seeded permutation of the training set cut in WORLD parts.
    g = torch.Generator().manual_seed(a.seed)
    shard = torch.randperm(len(xtr), generator=g)[a.rank::a.world]
    xs, ys = xtr[shard], ytr[shard]
    steps_per_epoch = len(xs) // a.batch
    total = int(a.epochs * steps_per_epoch)
    warm = a.warmup_epochs * steps_per_epoch

    model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128),
                          nn.ReLU(), nn.Linear(128, 10))
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch.optim.SGD(ddp.parameters(), lr=a.lr, momentum=a.momentum,
                          weight_decay=a.weight_decay)
    d = sum(p.numel() for p in model.parameters())
    per_step = 2.0 * (a.world - 1) / a.world * 4 * d
    dist.barrier()
    if a.rank == 0:
        emit(ev="start", t=time.time(), params=d, steps=total,
             steps_per_epoch=steps_per_epoch, bytes_per_step=per_step)

    def lr_at(step):
        if step < warm:
            return a.lr * (step + 1) / warm
        p = (step - warm) / max(1.0, total - warm)
        return a.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, p)))

    lossf = nn.CrossEntropyLoss()
    step = 0
    while step < total:
        epoch = step // steps_per_epoch
        perm = torch.randperm(len(xs), generator=torch.Generator().manual_seed(
            a.seed * 1000003 + a.rank * 1009 + epoch))
        for b in range(steps_per_epoch):
            if step >= total:
                break
            idx = perm[b * a.batch:(b + 1) * a.batch]
            for grp in opt.param_groups:
                grp["lr"] = lr_at(step)
            opt.zero_grad(set_to_none=True)
            lossf(ddp(xs[idx]), ys[idx]).backward()
            opt.step()
            step += 1
            if a.eval_every > 0 and step % a.eval_every == 0:
                acc, loss = evaluate(model, xev, yev)
                if a.rank == 0:
                    emit(ev="eval", step=step, epoch=step / steps_per_epoch,
                         t=time.time(), accuracy=acc, loss=loss,
                         bytes=per_step * step)
    t_end = time.time()
    acc, loss = evaluate(model, xev, yev)
    full_acc, full_loss = evaluate(model, xte, yte)
    dist.barrier()
    measured = socket_bytes_sent(os.getpid())
    allm = [None] * a.world
    dist.all_gather_object(allm, measured)
    if a.rank == 0:
        emit(ev="eval", step=step, epoch=step / steps_per_epoch, t=t_end,
             accuracy=acc, loss=loss, bytes=per_step * step)
        emit(ev="done", steps=step, t=t_end, accuracy_full=full_acc,
             loss_full=full_loss, bytes=per_step * step, bytes_ss=allm)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
