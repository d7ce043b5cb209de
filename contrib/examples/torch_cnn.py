#!/usr/bin/python3
"""A small CNN on Fashion-MNIST, trained the usual PyTorch way, with its
parameters shared with a gossipd peer started with --trainer external:

    gossipd --trainer external --listen ... --peers ... &
    PYTHONPATH=src/python contrib/examples/torch_cnn.py --shard 0/4

The gossipd lines are marked "gossipd:"; --no-gossip runs the same loop
without them (to measure what attaching costs). Each peer of a job trains on
its own shard of the training set. Every peer starts from one model: the
daemons agree on it (gossipd(8), START) whatever --seed each process has.
Training continues from the
step the peer reports when it already holds the job's model (a process that
attached before, a checkpoint, a joiner's pull).

The last line printed is "final accuracy X.XXXX" (on the test set, or its
first --eval-samples images). With --json it prints one JSON object a line
instead, "ev" saying which: start (training begins; t is unix time), eval
(step, epoch, t, accuracy, loss and, when attached, the peer's bytes_sent
at that moment), done (steps, t, the whole test set's accuracy and loss, the
loop's time split into evaluations and peer.step() calls, the peer's last
bytes_sent). --profile-step prints that split in the text mode.

The model, data, shard, batch order and learning-rate schedule are
importable (contrib/bench/ddp_cnn.py trains the same CNN with PyTorch DDP):
CNN, load, shard_range, batch_order, lr_at, make_optimizer, evaluate and
add_training_args, which declares the options both scripts share.
"""
import argparse
import gzip
import json
import math
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
    """conv 5x5 (C1 channels), ReLU, max-pool 2; conv 5x5 (C2), ReLU,
    max-pool 2; linear to the 10 classes."""

    def __init__(self, c1=8, c2=16):
        super().__init__()
        self.conv1 = nn.Conv2d(1, c1, 5, padding=2)     # 28x28, pooled to 14x14
        self.conv2 = nn.Conv2d(c1, c2, 5, padding=2)    # 14x14, pooled to 7x7
        self.fc = nn.Linear(c2 * 7 * 7, 10)

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


def channels(arg):
    try:
        c1, c2 = (int(c) for c in arg.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError("channels %s: want C1,C2" % arg) from None
    if c1 < 1 or c2 < 1:
        raise argparse.ArgumentTypeError("channels %s: want positive counts" % arg)
    return c1, c2


def shard_range(count, i, n):
    """[lo, hi) of the I-th of N contiguous parts of COUNT samples. The
    training file is in no class order, so the parts are alike (iid)."""
    return count * i // n, count * (i + 1) // n


def batch_order(count, seed, i, epoch):
    """The order of shard I's COUNT samples in EPOCH: one order per epoch and
    shard, so that a process continuing at any step takes the batches the
    previous one would have taken."""
    return torch.randperm(count, generator=torch.Generator().manual_seed(
        seed * 1000003 + i * 1009 + epoch))


def lr_at(args, step, total, per_epoch):
    """The learning rate of STEP (0-based) of TOTAL: linear warm-up over
    --warmup-epochs, then --lr-schedule (constant, or cosine down to 0 at
    TOTAL)."""
    warm = args.warmup_epochs * per_epoch
    if step < warm:
        return args.lr * (step + 1) / warm
    if args.lr_schedule == "constant":
        return args.lr
    p = (step - warm) / max(1.0, total - warm)
    return args.lr * 0.5 * (1.0 + math.cos(math.pi * min(1.0, p)))


def make_optimizer(args, params):
    return torch.optim.SGD(params, lr=args.lr, momentum=args.momentum,
                           weight_decay=args.weight_decay)


def add_training_args(ap):
    """The options of the model, the data and the optimisation."""
    ap.add_argument("--epochs", type=float, default=1, help="epochs over this shard")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--lr-schedule", choices=("constant", "cosine"), default="constant",
                    help="after the warm-up: constant, or cosine down to 0 at the last step")
    ap.add_argument("--warmup-epochs", type=float, default=0,
                    help="linear warm-up of the learning rate over this many epochs")
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=0)
    ap.add_argument("--channels", type=channels, default=(8, 16), metavar="C1,C2",
                    help="channels of the two convolutions")
    ap.add_argument("--seed", type=int, default=1,
                    help="model initialisation; the same for every peer of a job")
    ap.add_argument("--eval-every", type=int, default=0, metavar="STEPS",
                    help="evaluate and report the accuracy every STEPS steps (and at the end)")
    ap.add_argument("--eval-samples", type=int, default=0,
                    help="evaluate on the first N test images (default: all)")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--data", default=DATA, help="directory of the Fashion-MNIST .gz files")


def emit(**kw):
    print(json.dumps(kw), flush=True)


def main():
    ap = argparse.ArgumentParser(description="A small CNN on Fashion-MNIST, its parameters "
                                 "shared with a gossipd peer started with --trainer external.")
    ap.add_argument("--socket", help="the peer's control socket (default: the job's, "
                    "as gossipctl's)")
    ap.add_argument("--job", default="default", help="job name for the default socket")
    ap.add_argument("--shard", type=shard, default=(0, 1), metavar="I/N",
                    help="train on the I-th of N contiguous parts of the training set")
    add_training_args(ap)
    ap.add_argument("--log-every", type=int, default=100, metavar="STEPS")
    ap.add_argument("--limit-steps", type=int, default=0, metavar="N",
                    help="stop once the job's step count reaches N (steps made before "
                         "this process attached count)")
    ap.add_argument("--share-momentum", action="store_true",
                    help="share SGD's momentum buffers with the peer too, so they are averaged")
    ap.add_argument("--no-gossip", action="store_true",
                    help="train alone, without a gossipd peer")
    ap.add_argument("--leave", action="store_true",
                    help="at the end, ask the peer to leave the job (final checkpoint, exit)")
    ap.add_argument("--name", help="this process's name in the peer's status")
    ap.add_argument("--json", action="store_true",
                    help="JSON lines (start, eval, done events) instead of the text lines")
    ap.add_argument("--profile-step", action="store_true",
                    help="at the end, say where the loop's time went (evaluations, "
                         "peer.step() calls, the rest)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    x, y = load(args.data, "train")
    full_tx, full_ty = tx, ty = load(args.data, "t10k")
    if args.eval_samples:
        tx, ty = tx[:args.eval_samples], ty[:args.eval_samples]
    i, n = args.shard
    lo, hi = shard_range(len(x), i, n)
    x, y = x[lo:hi], y[lo:hi]
    per_epoch = len(x) // args.batch
    total = int(per_epoch * args.epochs)
    if args.limit_steps:
        total = min(total, args.limit_steps)

    torch.manual_seed(args.seed)        # before the model: every peer starts alike
    model = CNN(*args.channels)
    opt = make_optimizer(args, model.parameters())
    peer = None
    step = 0
    if not args.no_gossip:
        # gossipd: share the parameters with the peer.
        peer = gossipd.attach(model, socket=args.socket, job=args.job,
                              name=args.name or "torch_cnn.py %d/%d" % (i, n),
                              optimizer=opt if args.share_momentum else None)
        step = peer.step_count
        if not args.json:
            print("attached: %d parameters, %s, step %d" %
                  (peer.params, "fresh" if peer.fresh else "the job's model", step), flush=True)
    if args.json:
        emit(ev="start", t=time.time(), step=step, steps=total, steps_per_epoch=per_epoch,
             params=sum(p.numel() for p in model.parameters()), attached=peer is not None,
             fresh=peer.fresh if peer else None)

    t0, c0 = time.perf_counter(), time.process_time()
    start, losses, acc, evaluated = step, [], None, -1
    order, order_epoch = None, -1
    eval_s, eval_cpu_s, peer_times = 0.0, 0.0, []
    while step < total:
        epoch, b = divmod(step, per_epoch)
        if epoch != order_epoch:
            order = batch_order(len(x), args.seed, i, epoch)
            order_epoch = epoch
        idx = order[b * args.batch:(b + 1) * args.batch]
        for group in opt.param_groups:
            group["lr"] = lr_at(args, step, total, per_epoch)
        opt.zero_grad()
        loss = F.cross_entropy(model(x[idx]), y[idx])
        loss.backward()
        opt.step()
        step += 1
        loss = loss.item()
        losses.append(loss)

        report = {}
        if step == total or (args.eval_every and step % args.eval_every == 0):
            te, ce = time.perf_counter(), time.process_time()
            acc, test_loss = evaluate(model, tx, ty)
            evaluated = step
            report = dict(accuracy=acc, test_loss=test_loss)
            if args.json:
                # The peer's traffic at the moment of this evaluation.
                sent = peer.status().get("bytes_sent") if peer else None
                emit(ev="eval", step=step, epoch=step / per_epoch, t=time.time(),
                     accuracy=acc, loss=test_loss, bytes_sent=sent)
            eval_s += time.perf_counter() - te
            eval_cpu_s += time.process_time() - ce
        if not args.json and (step % args.log_every == 0 or report):
            print("step %d epoch %d loss %.4f%s%s" % (
                step, epoch, sum(losses) / len(losses),
                " accuracy %.4f" % acc if report else "",
                " mixes %d" % peer.mixes if peer else ""), flush=True)
            losses = []
        # gossipd: a step boundary; False when the peer is leaving.
        if peer:
            tp = time.perf_counter()
            going = peer.step(loss=loss, samples=len(idx), epoch=epoch, **report)
            peer_times.append(time.perf_counter() - tp)
            if not going:
                if not args.json:
                    print("the peer is leaving: training ends at step %d" % step, flush=True)
                break
    took, took_cpu = time.perf_counter() - t0, time.process_time() - c0
    t_end = time.time()

    sent = None
    if peer:
        if args.json:
            sent = peer.status().get("bytes_sent")
        if args.leave and not peer.stopped:
            peer.leave()
        peer.close()        # gossipd: detach; the model keeps its values
    if evaluated != step or acc is None:
        acc, _ = evaluate(model, tx, ty)
    steps = step - start
    peer_s, peer_calls = sum(peer_times), len(peer_times)
    peer_times.sort()
    peer_q = [peer_times[int(q * (peer_calls - 1))] if peer_times else 0.0
              for q in (0.5, 0.9, 0.99, 1)]
    if args.json:
        full_acc, full_loss = evaluate(model, full_tx, full_ty)
        emit(ev="done", t=t_end, step=step, steps=steps, accuracy=acc,
             accuracy_full=full_acc, loss_full=full_loss, loop_s=took, eval_s=eval_s,
             peer_step_s=peer_s, peer_step_calls=peer_calls, peer_step_p50_s=peer_q[0],
             peer_step_p90_s=peer_q[1], peer_step_p99_s=peer_q[2], peer_step_max_s=peer_q[3],
             step_s=(took - eval_s) / steps if steps else None, loop_cpu_s=took_cpu,
             eval_cpu_s=eval_cpu_s,
             step_cpu_s=(took_cpu - eval_cpu_s) / steps if steps else None, bytes_sent=sent,
             mixes=peer.mixes if peer else None)
        return
    if steps > 0:
        print("trained %d steps in %.1f s: %.0f samples/s" %
              (steps, took, steps * args.batch / took), flush=True)
        if args.profile_step:
            print("time per step %.2f ms without evaluations (%.1f s of evaluations), "
                  "CPU time per step %.2f ms; in peer.step(): %.3f ms per call, %.2f%% of the "
                  "step (%d calls; median %.3f, 90%% %.3f, 99%% %.3f, longest %.1f ms)" % (
                      1000 * (took - eval_s) / steps, eval_s,
                      1000 * (took_cpu - eval_cpu_s) / steps,
                      1000 * peer_s / max(1, peer_calls),
                      100 * peer_s / max(1e-9, took - eval_s), peer_calls,
                      *(1000 * q for q in peer_q)), flush=True)
    print("final accuracy %.4f" % acc, flush=True)


if __name__ == "__main__":
    try:
        main()
    except gossipd.AttachError as e:
        sys.exit("torch_cnn.py: %s" % e)
