#!/usr/bin/python3
"""PyTorch DDP baseline for contrib/bench/charlm.sh: one worker process,
training contrib/examples/torch_charlm.py's character language model the way
torch_charlm.py does.

The corpus and its split, the model, the batches (shard RANK/WORLD of the
training text, windows drawn from --data-seed, default seed + 1000 * RANK,
as gossip peer RANK of a WORLD-peer job draws them), AdamW, the schedule,
the clipping and the validation windows come from torch_charlm.py itself,
imported, with the same options and defaults
(torch_charlm.add_training_args); the model starts from the same --seed.
Only the step differs: DDP averages the WORLD workers' gradients (gloo
all-reduce) in the backward pass, before the clipping and AdamW's step.

The driver starts WORLD of these (--rank 0..WORLD-1) on 127.0.0.1. Every
worker computes the validation loss every --eval-every steps, as every
attached torch_charlm.py does, so that measuring costs the same per process
in both systems; rank 0 logs it (the models are identical).

Bytes: the ring all-reduce volume, 2 (n-1)/n * 4 d bytes sent per worker per
step (as contrib/bench/ddp_cnn.py). At the end every worker also reads, with
ss(8), the bytes_sent of its own TCP sockets as a cross-check.

Output lines on stdout, one JSON object each, "ev" says which:
  start   after rendezvous, data and model are ready (t = unix time)
  eval    step, t, val_loss, train_loss (rank 0's, since the last eval),
          bytes (analytic, cumulative, per worker)
  done    steps, t, val_loss, step_s, bytes analytic and ss (every worker)
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

import torch_charlm as lm                       # noqa: E402
from ddp_torch import socket_bytes_sent         # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rank", type=int, required=True)
    ap.add_argument("--world", type=int, default=4)
    ap.add_argument("--port", type=int, default=26500)
    lm.add_training_args(ap)
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % a.port,
                            rank=a.rank, world_size=a.world)
    train, val, vocab = lm.load_corpus(a.corpus)
    lo, hi = lm.shard_range(len(train), a.rank, a.world)
    train = train[lo:hi]
    data_seed = a.data_seed if a.data_seed is not None else a.seed + 1000 * a.rank
    vx = lm.val_windows(val, a).to(a.device)

    torch.manual_seed(a.seed)
    model = lm.CharLM(len(vocab), a.width, a.layers, a.heads, a.context).to(a.device)
    ddp = nn.parallel.DistributedDataParallel(model)
    opt = lm.make_optimizer(a, model)
    d = sum(p.numel() for p in model.parameters())
    per_step = 2.0 * (a.world - 1) / a.world * 4 * d
    dist.barrier()
    if a.rank == 0:
        lm.emit(ev="start", t=time.time(), params=d, steps=a.steps, bytes_per_step=per_step)

    step, losses, val_loss, eval_s = 0, [], None, 0.0
    t0 = time.perf_counter()
    while step < a.steps:
        xy = lm.batch_at(train, a, data_seed, step).to(a.device)
        for group in opt.param_groups:
            group["lr"] = lm.lr_at(a, step)
        opt.zero_grad(set_to_none=True)
        loss = lm.lm_loss(ddp, xy)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.clip)
        opt.step()
        step += 1
        losses.append(loss.item())
        if step == a.steps or (a.eval_every and step % a.eval_every == 0):
            te = time.perf_counter()
            val_loss = lm.evaluate(model, vx, a.batch)
            if a.rank == 0:
                lm.emit(ev="eval", step=step, t=time.time(), val_loss=val_loss,
                        train_loss=sum(losses) / len(losses), bytes=per_step * step)
            losses = []
            eval_s += time.perf_counter() - te
    took = time.perf_counter() - t0
    t_end = time.time()
    dist.barrier()
    measured = socket_bytes_sent(os.getpid())
    allm = [None] * a.world
    dist.all_gather_object(allm, measured)
    if a.rank == 0:
        lm.emit(ev="done", t=t_end, steps=step, val_loss=val_loss, params=d, loop_s=took,
                eval_s=eval_s, step_s=(took - eval_s) / max(1, step),
                bytes=per_step * step, bytes_ss=allm)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
