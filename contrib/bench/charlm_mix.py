#!/usr/bin/python3
"""The bound a mixing rule puts on learning per step, without a network:
PEERS copies of contrib/examples/torch_charlm.py's model in one process,
each with its own AdamW, shard (I/PEERS) and batch draws (--data-seed
1000 I + --seed, as contrib/bench/charlm.sh gives its peers), all from one
initial model, mixed exactly after every EVERY steps:

  all    every peer takes the mean of all of them, as an all-reduce of
         the models would give (with --outer-lr x: the mean of the moves
         since the last mix, times x, from there: DiLoCo's outer step
         without momentum; 1 is the plain mean)
  ddp    no mixing: one model takes the mean of the PEERS shards'
         gradients each step, as PyTorch DDP does (the reference at any
         step count, without charlm.sh's processes)
  sparse SparseLoCo's rule, without quantisation: every EVERY steps each
         peer adds its move since the last mix to an error-feedback
         residual, sends the --density share of largest magnitude
         (per tensor) to all, keeps the rest, and every peer moves to the
         anchor plus --outer-lr times the mean of what was sent: the peers
         stay one model; each sends its share to PEERS - 1 others
  pairs  the peers are paired at random and each pair averages, on a
         random --density share of the coordinates (1: the whole model);
         one such round every EVERY steps is about gossipd's exchanges
         every 2 EVERY steps (each peer starts one and serves about one)

It prints the validation loss of peer 0 and of the peers' mean model every
--eval-every steps, on charlm.sh's windows, for setting beside charlm.sh's
DDP figures at equal steps (the same model, data and schedule).

    charlm_mix.py --mix all --every 1 [training options as charlm.sh's]

Measured on this 2-core machine with charlm.sh's settings (400 steps,
context 64, width 256, seed 1), validation loss at step 400: DDP 1.939
(--mix ddp here: 1.9394);
all every step 1.992 (1.027x), with --outer-lr 1.5 1.962 (1.011x); pairs
every step, whole model 2.008 (1.035x); pairs on 4% of the coordinates
every 2 steps 2.195 (1.132x), where gossipd's 4 peers (charlm.sh: saps,
density 0.04, int8, every 4 steps) ended at 2.204-2.212; every step 2.155
(1.111x); on 25% every 2 steps 2.076 (1.070x). sparse: every 4 steps on
2% 2.107 (1.086x), every 2 on 4% 2.034 (1.049x), with --outer-lr 1.5 2.015
(1.039x), every step on 2% 2.111 (1.089x). 800 steps (the schedule stretched):
ddp 1.7552, pairs on 4% every 2 steps 1.9702 (1.122x). Peer 0's figures;
one run each.
"""
import argparse
import copy
import os
import random
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "src", "python"))
import torch_charlm as lm  # noqa: E402


@torch.no_grad()
def mix_all(peers, anchor, outer_lr):
    """Every peer moves to anchor + outer_lr (mean - anchor); so does the anchor."""
    for k, ps in enumerate(zip(*[list(m.parameters()) for m in peers])):
        mean = sum(ps) / len(ps)
        anchor[k].add_(outer_lr * (mean - anchor[k]))
        for p in ps:
            p.copy_(anchor[k])


@torch.no_grad()
def mix_sparse(peers, anchor, residual, density, outer_lr):
    """Top-k of each peer's residual plus move, averaged, from the anchor."""
    for k, ps in enumerate(zip(*[list(m.parameters()) for m in peers])):
        sent = torch.zeros_like(anchor[k])
        for i, p in enumerate(ps):
            e = residual[i][k]
            e.add_(p - anchor[k])
            n = max(1, int(density * e.numel()))
            idx = e.abs().flatten().topk(n).indices
            share = torch.zeros_like(e).flatten()
            share[idx] = e.flatten()[idx]
            share = share.view_as(e)
            e.sub_(share)
            sent.add_(share)
        anchor[k].add_(outer_lr * sent / len(ps))
        for p in ps:
            p.copy_(anchor[k])


@torch.no_grad()
def mix_pairs(peers, density, rng, gen):
    """Random pairs average on a random density share of the coordinates."""
    order = list(range(len(peers)))
    rng.shuffle(order)
    for u in range(0, len(order) - 1, 2):
        a, b = peers[order[u]], peers[order[u + 1]]
        for p, q in zip(a.parameters(), b.parameters()):
            mean = (p + q) / 2
            if density < 1:
                keep = torch.rand(p.shape, generator=gen) < density
                mean_p, mean_q = torch.where(keep, mean, p), torch.where(keep, mean, q)
                p.copy_(mean_p)
                q.copy_(mean_q)
            else:
                p.copy_(mean)
                q.copy_(mean)


def local_step(m, opt, shard, data_seed, a, step):
    """One AdamW step of one peer on its own batch."""
    for g in opt.param_groups:
        g["lr"] = lm.lr_at(a, step)
    opt.zero_grad()
    lm.lm_loss(m, lm.batch_at(shard, a, data_seed, step)).backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), a.clip)
    opt.step()


def ddp_step(m, opt, shards, a, step):
    """One step on the mean of every shard's gradient (each shard's batch
    drawn as its peer's would be), as DDP's all-reduce gives."""
    for g in opt.param_groups:
        g["lr"] = lm.lr_at(a, step)
    opt.zero_grad()
    for i, shard in enumerate(shards):
        (lm.lm_loss(m, lm.batch_at(shard, a, 1000 * i + a.seed, step)) / len(shards)).backward()
    torch.nn.utils.clip_grad_norm_(m.parameters(), a.clip)
    opt.step()


@torch.no_grad()
def mean_model(peers):
    m = copy.deepcopy(peers[0])
    for p, *ps in zip(m.parameters(), *[x.parameters() for x in peers]):
        p.copy_(sum(ps) / len(ps))
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    lm.add_training_args(ap)
    ap.add_argument("--peers", type=int, default=4)
    ap.add_argument("--mix", choices=("all", "pairs", "ddp", "sparse"), default="all")
    ap.add_argument("--every", type=int, default=1, metavar="STEPS", help="steps between mixes")
    ap.add_argument("--density", type=float, default=1.0,
                    help="pairs, sparse: share of coordinates mixed")
    ap.add_argument("--outer-lr", type=float, default=1.0,
                    help="all, sparse: the outer step's rate")
    a = ap.parse_args()
    if a.peers < 2 or a.every < 1 or not 0 < a.density <= 1 or a.outer_lr <= 0:
        ap.error("want --peers >= 2, --every >= 1, 0 < --density <= 1, --outer-lr > 0")
    torch.set_num_threads(a.threads)
    train, val, vocab = lm.load_corpus(a.corpus)
    vx = lm.val_windows(val, a)
    torch.manual_seed(a.seed)
    start = lm.CharLM(len(vocab), a.width, a.layers, a.heads, a.context)
    peers = [copy.deepcopy(start) for _ in range(1 if a.mix == "ddp" else a.peers)]
    opts = [lm.make_optimizer(a, m) for m in peers]
    shards = [train[slice(*lm.shard_range(len(train), i, a.peers))] for i in range(a.peers)]
    anchor = [p.detach().clone() for p in start.parameters()]
    rng, gen = random.Random(a.seed), torch.Generator().manual_seed(a.seed)
    residual = [[torch.zeros_like(p) for p in anchor] for _ in peers]
    for step in range(a.steps):
        if a.mix == "ddp":
            ddp_step(peers[0], opts[0], shards, a, step)
            mix_now = False
        else:
            for i, (m, opt) in enumerate(zip(peers, opts)):
                local_step(m, opt, shards[i], 1000 * i + a.seed, a, step)
            mix_now = (step + 1) % a.every == 0
        if mix_now and a.mix == "all":
            mix_all(peers, anchor, a.outer_lr)
        elif mix_now and a.mix == "sparse":
            mix_sparse(peers, anchor, residual, a.density, a.outer_lr)
        elif mix_now:
            mix_pairs(peers, a.density, rng, gen)
        if (step + 1) % a.eval_every == 0 or step + 1 == a.steps:
            print("step %d val_loss peer0 %.4f mean %.4f" % (
                step + 1, lm.evaluate(peers[0], vx, a.batch),
                lm.evaluate(mean_model(peers), vx, a.batch)), flush=True)


if __name__ == "__main__":
    main()
