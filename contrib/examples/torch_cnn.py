#!/usr/bin/python3
"""A small CNN on Fashion-MNIST, trained the usual PyTorch way, with its
parameters shared with a gossipd peer started with --trainer external:

    gossipd --trainer external --listen ... --peers ... &
    PYTHONPATH=src/python contrib/examples/torch_cnn.py --shard 0/4

The gossipd lines are marked "gossipd:"; --no-gossip runs the same loop
without them (to measure what attaching costs). Each peer of a job trains on
its own shard of the training set; --seed must be the same for all of them,
so that every peer starts from the same model. Training continues from the
step the peer reports when it already holds the job's model (a process that
attached before, a checkpoint, a joiner's pull).

The last line printed is "final accuracy X.XXXX" (on the test set, or its
first --eval-samples images).
"""
import argparse
import gzip
import os
import struct
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import gossipd

DATA = "/usr/share/datasets/fashion-mnist"
# Fashion-MNIST's pixel mean and standard deviation (of x / 255).
MEAN, STD = 0.2860, 0.3530


def read_idx(path):
    """An IDX file (gzip'ed) as a uint8 tensor of its shape."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    if magic >> 8 != 0x08:      # 0x08: unsigned bytes; low byte: dimensions
        sys.exit("%s: not an IDX file of unsigned bytes" % path)
    ndim = magic & 0xff
    shape = struct.unpack(">%dI" % ndim, raw[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8).view(shape)


def load(data, kind):
    """(images N x 1 x 28 x 28 normalised float32, labels int64) of KIND
    ("train" or "t10k")."""
    x = read_idx(os.path.join(data, "%s-images-idx3-ubyte.gz" % kind))
    y = read_idx(os.path.join(data, "%s-labels-idx1-ubyte.gz" % kind))
    return ((x.float() / 255 - MEAN) / STD).unsqueeze(1), y.long()


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 8, 5, padding=2)      # 28x28, pooled to 14x14
        self.conv2 = nn.Conv2d(8, 16, 5, padding=2)     # 14x14, pooled to 7x7
        self.fc = nn.Linear(16 * 7 * 7, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc(x.flatten(1))


@torch.no_grad()
def evaluate(model, x, y):
    """(accuracy, mean loss) of MODEL on X, Y."""
    model.eval()
    correct, loss = 0, 0.0
    for i in range(0, len(x), 1000):
        out = model(x[i:i + 1000])
        loss += F.cross_entropy(out, y[i:i + 1000], reduction="sum").item()
        correct += (out.argmax(1) == y[i:i + 1000]).sum().item()
    model.train()
    return correct / len(x), loss / len(x)


def shard(arg):
    i, _, n = arg.partition("/")
    i, n = int(i), int(n)
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError("shard %s: want I/N with 0 <= I < N" % arg)
    return i, n


def main():
    ap = argparse.ArgumentParser(description="A small CNN on Fashion-MNIST, its parameters "
                                 "shared with a gossipd peer started with --trainer external.")
    ap.add_argument("--socket", help="the peer's control socket (default: the job's, "
                    "as gossipctl's)")
    ap.add_argument("--job", default="default", help="job name for the default socket")
    ap.add_argument("--shard", type=shard, default=(0, 1), metavar="I/N",
                    help="train on the I-th of N contiguous parts of the training set")
    ap.add_argument("--epochs", type=int, default=1, help="epochs over this shard")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1,
                    help="model initialisation; the same for every peer of a job")
    ap.add_argument("--eval-every", type=int, default=0, metavar="STEPS",
                    help="evaluate and report the accuracy every STEPS steps (and at the end)")
    ap.add_argument("--eval-samples", type=int, default=0,
                    help="evaluate on the first N test images (default: all)")
    ap.add_argument("--log-every", type=int, default=100, metavar="STEPS")
    ap.add_argument("--limit-steps", type=int, default=0, metavar="N",
                    help="stop once the job's step count reaches N (steps made before "
                         "this process attached count)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--share-momentum", action="store_true",
                    help="share SGD's momentum buffers with the peer too, so they are averaged")
    ap.add_argument("--no-gossip", action="store_true",
                    help="train alone, without a gossipd peer")
    ap.add_argument("--leave", action="store_true",
                    help="at the end, ask the peer to leave the job (final checkpoint, exit)")
    ap.add_argument("--name", help="this process's name in the peer's status")
    ap.add_argument("--data", default=DATA, help="directory of the Fashion-MNIST .gz files")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    x, y = load(args.data, "train")
    tx, ty = load(args.data, "t10k")
    if args.eval_samples:
        tx, ty = tx[:args.eval_samples], ty[:args.eval_samples]
    i, n = args.shard
    lo, hi = len(x) * i // n, len(x) * (i + 1) // n
    x, y = x[lo:hi], y[lo:hi]
    per_epoch = len(x) // args.batch
    total = per_epoch * args.epochs
    if args.limit_steps:
        total = min(total, args.limit_steps)

    torch.manual_seed(args.seed)        # before the model: every peer starts alike
    model = CNN()
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    peer = None
    step = 0
    if not args.no_gossip:
        # gossipd: share the parameters with the peer.
        peer = gossipd.attach(model, socket=args.socket, job=args.job,
                              name=args.name or "torch_cnn.py %d/%d" % (i, n),
                              optimizer=opt if args.share_momentum else None)
        step = peer.step_count
        print("attached: %d parameters, %s, step %d" %
              (peer.params, "fresh" if peer.fresh else "the job's model", step), flush=True)

    t0 = time.perf_counter()
    start, losses, acc, evaluated = step, [], None, -1
    order, order_epoch = None, -1
    while step < total:
        epoch, b = divmod(step, per_epoch)
        if epoch != order_epoch:
            # One order per epoch and shard, so that a process continuing at
            # any step takes the batches the previous one would have taken.
            order = torch.randperm(len(x), generator=torch.Generator().manual_seed(
                args.seed * 1000003 + i * 1009 + epoch))
            order_epoch = epoch
        idx = order[b * args.batch:(b + 1) * args.batch]
        opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        step += 1
        loss = loss.item()
        losses.append(loss)

        report = {}
        if step == total or (args.eval_every and step % args.eval_every == 0):
            acc, test_loss = evaluate(model, tx, ty)
            evaluated = step
            report = dict(accuracy=acc, test_loss=test_loss)
        if step % args.log_every == 0 or report:
            print("step %d epoch %d loss %.4f%s%s" % (
                step, epoch, sum(losses) / len(losses),
                " accuracy %.4f" % acc if report else "",
                " mixes %d" % peer.mixes if peer else ""), flush=True)
            losses = []
        # gossipd: a step boundary; False when the peer is leaving.
        if peer and not peer.step(loss=loss, samples=len(idx), epoch=epoch, **report):
            print("the peer is leaving: training ends at step %d" % step, flush=True)
            break
    took = time.perf_counter() - t0

    if peer:
        if args.leave and not peer.stopped:
            peer.leave()
        peer.close()        # gossipd: detach; the model keeps its values
    if evaluated != step or acc is None:
        acc, _ = evaluate(model, tx, ty)
    if step > start:
        print("trained %d steps in %.1f s: %.0f samples/s" %
              (step - start, took, (step - start) * args.batch / took), flush=True)
    print("final accuracy %.4f" % acc, flush=True)


if __name__ == "__main__":
    try:
        main()
    except gossipd.AttachError as e:
        sys.exit("torch_cnn.py: %s" % e)
