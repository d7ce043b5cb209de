#!/usr/bin/python3
"""PyTorch DDP baseline for contrib/bench/attach.sh: one worker process,
training contrib/examples/torch_cnn.py's CNN the way torch_cnn.py does.

The model, the data (normalisation, contiguous iid shard RANK/WORLD of the
training set), the batch order of each epoch, the optimizer (SGD with
momentum and weight decay) and the learning-rate schedule come from
torch_cnn.py itself, imported, with the same options and defaults
(torch_cnn.add_training_args): worker RANK of WORLD takes the batches that
gossip peer RANK of a WORLD-peer job takes, and the model starts from the
same --seed. Only the step differs: DDP averages the gradients of the WORLD
workers (gloo all-reduce) before each optimizer step.

The driver starts WORLD of these (--rank 0..WORLD-1) on 127.0.0.1. Every
worker evaluates its (identical) model on the first --eval-samples test
images every --eval-every steps, as every attached torch_cnn.py does, so
measurement costs the same per process in both systems; rank 0 logs it.

Bytes: per step DDP all-reduces the gradient once (one bucket: the model is
far under DDP's 25 MB bucket). The analytic count is the ring all-reduce
volume, 2 (n-1)/n * 4 d bytes sent per worker per step. At the end every
worker also reads, with ss(8), the bytes_sent of its own TCP sockets (gloo
pairs, the rendezvous store, DDP's initial broadcast of the model) as a
cross-check of that formula (contrib/bench/ddp_torch.py's socket_bytes_sent).

Output lines on stdout, one JSON object each, "ev" says which:
  start   (after rendezvous, data and model are ready; t = unix time)
  eval    step, epoch, t, accuracy, loss, bytes (analytic, cumulative)
  done    steps, t, whole test set accuracy and loss, bytes analytic and ss
"""
import argparse
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.join(here, "..", "..")
sys.path[:0] = [here, os.path.join(top, "contrib", "examples"), os.path.join(top, "src", "python")]

import torch                                    # noqa: E402
import torch.distributed as dist                # noqa: E402
import torch.nn as nn                           # noqa: E402
import torch.nn.functional as F                 # noqa: E402

import torch_cnn                                # noqa: E402
from ddp_torch import socket_bytes_sent         # noqa: E402

emit = torch_cnn.emit


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--port", type=int, default=26500)
    torch_cnn.add_training_args(ap)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port,
                            rank=a.rank, world_size=a.world)
    x, y = torch_cnn.load(a.data, "train")
    full_tx, full_ty = tx, ty = torch_cnn.load(a.data, "t10k")
    if a.eval_samples:
        tx, ty = tx[:a.eval_samples], ty[:a.eval_samples]
    lo, hi = torch_cnn.shard_range(len(x), a.rank, a.world)
    x, y = x[lo:hi], y[lo:hi]
    per_epoch = len(x) // a.batch
    total = int(per_epoch * a.epochs)

    torch.manual_seed(a.seed)
    model = torch_cnn.CNN(*a.channels)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = torch_cnn.make_optimizer(a, ddp.parameters())
    d = sum(p.numel() for p in model.parameters())
    per_step = 2.0 * (a.world - 1) / a.world * 4 * d
    dist.barrier()
    if a.rank == 0:
        emit(ev="start", t=time.time(), params=d, steps=total,
             steps_per_epoch=per_epoch, bytes_per_step=per_step)

    step, order, order_epoch = 0, None, -1
    t0 = time.perf_counter()
    eval_s = 0.0
    while step < total:
        epoch, b = divmod(step, per_epoch)
        if epoch != order_epoch:
            order = torch_cnn.batch_order(len(x), a.seed, a.rank, epoch)
            order_epoch = epoch
        idx = order[b * a.batch:(b + 1) * a.batch]
        for group in opt.param_groups:
            group["lr"] = torch_cnn.lr_at(a, step, total, per_epoch)
        opt.zero_grad()
        F.cross_entropy(ddp(x[idx]), y[idx]).backward()
        opt.step()
        step += 1
        if step == total or (a.eval_every and step % a.eval_every == 0):
            te = time.perf_counter()
            acc, loss = torch_cnn.evaluate(model, tx, ty)
            if a.rank == 0:
                emit(ev="eval", step=step, epoch=step / per_epoch, t=time.time(),
                     accuracy=acc, loss=loss, bytes=per_step * step)
            eval_s += time.perf_counter() - te
    took = time.perf_counter() - t0
    t_end = time.time()
    full_acc, full_loss = torch_cnn.evaluate(model, full_tx, full_ty)
    dist.barrier()
    measured = socket_bytes_sent(os.getpid())
    allm = [None] * a.world
    dist.all_gather_object(allm, measured)
    if a.rank == 0:
        emit(ev="done", t=t_end, steps=step, accuracy_full=full_acc, loss_full=full_loss,
             loop_s=took, eval_s=eval_s, step_s=(took - eval_s) / max(1, step),
             bytes=per_step * step, bytes_ss=allm)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
