#!/usr/bin/python3
"""The bound a mixing rule puts on learning per step, without a network:
PEERS copies of contrib/examples/torch_charlm.py's model in one process,
each with its own AdamW, shard (I/PEERS) and batch draws (--data-seed
1000 I + --seed, as contrib/bench/charlm.sh gives its peers), all from one
initial model, mixed exactly after every EVERY steps:

  all    every peer takes the mean of all of them, as an all-reduce of
         the models would give (with --outer-lr x: the mean of the moves
         since the last mix, times x, from there: DiLoCo's outer step;
         1 is the plain mean; --outer-momentum makes it Nesterov's)
  ddp    no mixing: one model takes the mean of the PEERS shards'
         gradients each step, as PyTorch DDP does (the reference at any
         step count, without charlm.sh's processes)
  sparse SparseLoCo's rule: every EVERY steps each peer adds its move
         since the last mix to an error-feedback residual, sends the
         --density share of largest magnitude (per tensor; --values int8
         and int2 round it as gossipd's values are) to all, keeps the rest,
         and moves to its anchor plus --outer-lr times the mean of the
         shares: the peers stay one model; each sends its share to
         PEERS - 1 others. With --stale S the others' shares arrive S
         mixes late (its own at once), as they would without a barrier;
         --eager then takes a peer's own share whole at once, in place of
         the mean not yet known, and puts the mean in its place when the
         others' come (DiLoCo's eager updates, arXiv 2502.12996)
  share  sparse's shares as a network without rounds carries them
         (the Shares class says how): each peer's rounds on its own
         clock (--stagger spreads them over the interval), each share
         reaching each other peer after up to --delay steps, or never
         (--loss), applied where it lands; --own-weight whole is --eager;
         --keep leaves in a peer's model what its rounds did not send
         (the anchor plus its residual, or a share of it) instead of the
         anchor alone; --late-density sends more late in the schedule,
         --late-outer-lr weighs it otherwise; --whole-vectors sends the
         tensors of at most one dimension whole in every round;
         --support, --combine, --flush, --decay-lr and --outer-momentum
         (rounds at once only: Nesterov's on the anchor's move of each
         round) are the trials of the gap's causes listed below
  pairs  the peers are paired at random and each pair averages, on a
         random --density share of the coordinates (1: the whole model),
         as gossipd's mode saps does; one such round every EVERY steps is
         about gossipd's exchanges every 2 EVERY steps (each peer starts
         one and serves about one). With --outer-lr or --outer-momentum
         each peer then takes its own outer step, as gossipd's does
  delta  as pairs, but in each pair one side (at random) picks the
         --density share of the whole model whose drift from its anchor
         is largest, and both average and anchor there: gossipd's mode
         delta (src/drift.h); the outer step as for pairs. --gain G takes
         the pair's mean drift G times there (from the mean of their
         anchors), an outer step on the mixed coordinates alone.
         --pairing: random disjoint pairs (the default), disjoint pairs
         taking every partner in turn (cycle), or gossipd's own pattern,
         each peer starting one exchange with any other (each; at twice
         the --every)
  grad   compressed gradients every step instead of models every few
         (Deep Gradient Compression's scheme, arXiv 1712.01887): one
         model; each step every peer adds its gradient to its own
         error-feedback residual (times --decay first), sends the
         --density share of largest magnitude (over the whole model,
         rounded as --values says) to all, keeps the rest, and AdamW
         steps on the mean of the shares, clipped as DDP clips its mean
         gradient; the peers stay one model
  lowrank
         PowerSGD's compressor (mix_lowrank says how), every peer's
         rounds at once: rank --rank of each matrix's mean residual, one
         power step a round, error feedback; two all-reduces in a
         network, which gossipd has not (a trial of another compressor
         than top-k)

It prints the validation loss of peer 0 and of the peers' mean model every
--eval-every steps, on charlm.sh's windows, for setting beside charlm.sh's
DDP figures at equal steps (the same model, data and schedule).

    charlm_mix.py --mix all --every 1

Its training settings default to charlm.sh's (400 steps, warm-up 40,
context 64; the rest are torch_charlm.py's defaults, which charlm.sh
keeps), so the figures below need no more options than they name.

Bytes per peer against DDP's ring all-reduce (4 peers: 1.5 times the
model a step in fp32), at int8 with one byte of index gap per value:
sparse about EVERY / DENSITY times fewer, pairs (saps) about
6 EVERY / DENSITY, delta about 4 EVERY / DENSITY.

Measured on this 2-core machine with charlm.sh's settings (400 steps,
context 64, width 256, seed 1), validation loss at step 400, peer 0, one
run each: DDP 1.939 (--mix ddp here: 1.9394).
- all every step 1.992 (1.027x); --outer-lr 1.5 1.962 (1.011x); 2.0
  1.9425 (1.002x).
- pairs every step, whole model 2.008 (1.035x); on 4% every 2 steps 2.195
  (1.132x, where gossipd's 4 peers in saps at 4% ended at 2.198-2.212);
  every step 2.155 (1.111x); on 25% every 2 steps 2.076 (1.070x); on 4%
  every 2 steps with each peer's own outer step 1.5: 2.244, worse. The
  whole model at DiLoCo's and NoLoCo's longer intervals: every 8 steps
  2.088 (1.077x, ~50x fewer bytes), every 16 2.137 (1.102x, ~100x); every
  16 with --outer-lr 1.5 2.176, with DiLoCo's 0.7 and --outer-momentum 0.9
  2.222: no better than delta's slices at equal bytes.
- delta every 2 steps on 4% 2.136 (1.101x, ~200x fewer bytes); on 8%
  2.100 (1.083x, ~100x); every 4 on 16% 2.104 (1.085x, ~100x). Choosing
  per tensor or per 64 Ki-value chunk instead of over the whole model
  (--select) did worse: 2.154 and 2.149 on 4% every 2 steps. --gain
  1.25, 1.5 and 2 on 4% every 2 steps: 2.130, 2.121 and 2.136; 1.5 on 8%
  2.091 (1.078x): less than 1% of the loss.
- sparse every 4 steps on 2% 2.107 (1.086x, ~200x); every 2 on 4%
  2.034 (1.049x, ~50x), with --outer-lr 1.5 2.015 (1.039x), 2.0 2.027,
  0.75 and --outer-momentum 0.5 2.120; every step on 2% 2.111 (1.089x);
  --outer-lr 1.5 throughout: every 4 on 8% 2.006 (1.034x, ~50x), every 8
  on 16% 2.034 (~50x); every 4 on 4% 2.021-2.025 (1.043x, ~100x), the
  same with --values int8 2.022, and with int8 and --stale 1 2.365
  (--outer-lr 1: 2.158): a share that arrives one mix late costs more
  than all the compression; every 8 on 8% 2.048 (~100x).
- the others' shares one mix late with --eager (sparse every 4 on 4%,
  int8): 2.072 with --outer-lr 1.5 (1.068x), 2.094 with 1; share every 4
  on 4%, int8, --stagger (no rounds, no delay): 2.068 (1.066x).
- share every 4 on 4%, int8, --stagger, each share at 2 / PEERS (gossipd's
  --optimizer adaptive at 4 peers): 2.0337 (1.049x); with --decay 0.95
  2.0164 (1.040x), 0.9 2.0125 (1.038x), 0.8 2.0120 (1.037x), 0.5 2.0484,
  0 (no error feedback) 2.0995 (1.083x). At 1.5 / PEERS: 2.0308, with
  --decay 0.95 2.0255; at 2.5 / PEERS with 0.9 2.0117; every 8 steps on
  8% (the same bytes) at 2 / PEERS with 0.9 2.0272.
- share every 4 on 4%, --stagger --select whole, 2 / PEERS, --decay 0.9,
  each share's values rounded in blocks of 64 in coordinate order, as
  gossipd forms them (before, in order of size): int8 2.0117 (1.037x);
  --values int2 (a sign and one of two magnitudes per 64 values, 0.375
  bytes a value against int8's 1.06) 2.0127 (1.038x).
- share every 4 on 4%, --select whole, 2 / PEERS, --decay 0.9, int2:
  the rounds at once (no --stagger) 2.0079 (1.035x; steps 100-300
  2.4388, 2.2003, 2.0737) against 2.0127 staggered (2.4762, 2.2115,
  2.0792); at once with every other peer's share landing 0 or 1 step
  late (--delay 1, as in a live job whose processes step on while the
  shares travel) 2.0251 (1.044x; 2.4966, 2.2271, 2.0919), as gossipd
  without --share-sync ended (1.047-1.050x); staggered and late 2.5168
  at step 100 (stopped). The same bytes more often do worse: every 2
  steps on 2% (--decay 0.95) 2.0189 (1.041x); every step on 1% (--decay
  0.975) 2.5846 and 2.3381 at steps 100 and 200 (stopped). --keep
  (staggered): 2.5525 at step 100 (stopped). On 6% at once: 2.4362 at
  step 100 (stopped).
- Where the gap comes from (int2, --decay 0.9, 2 / PEERS, --select
  whole, rounds at once, 4% every 4 steps: 2.4388 / 2.2003 / 2.0737 /
  2.0079 at steps 100-400 against DDP's 2.4033 / 2.1434 / 2.0110 /
  1.9394, 1.015 / 1.027 / 1.031 / 1.035 times): it grows as the learning
  rate falls, and none of these closes it. All peers sending at one
  support, the top of their residuals' sum (--support sum, an oracle no
  network has), so every coordinate's mean is over all PEERS: 2.4461 /
  2.2050 / 2.0778 / 2.0123, no better. The residuals' mean added to the
  anchor (--flush, as a closing dense round would): 2.4934 and 2.2567 at
  steps 100 and 200 (twice it: 2.6060, 2.3701): what a round leaves
  unsent is not learning left behind (after each reset the process's
  steps push the same coordinates again, so a steady direction enters the
  residual once a round; the decay bounds that). Each coordinate's shares
  combined as DDP's AdamW would step where they were all noise or all
  signal, the sign of their sum times the root of their squares' mean
  over PEERS (--combine rms, --outer-lr 1): 2.4561 / 2.2063 / 2.0758 /
  2.0040 (1.033x), worse until the last 100 steps; with --outer-lr 1.2
  2.4487 / 2.2157 (stopped). Dense shares of one bit a value every 8
  steps (--density 1 --values sign, about 120x fewer bytes): 2.6098 /
  2.3415 (stopped). The mean of all models every 4 steps taken twice
  (all --every 4 --outer-lr 2): 2.8257 at step 100 (stopped). Half of
  the residual left in the model (--keep 0.5): 2.4558 at step 100
  (stopped). Four times the share for the last quarter of the schedule
  (--late-density 0.16 --late-step 300, about 100x fewer bytes in all):
  2.0136 at step 400, worse than 4% throughout; half the share then
  (--late-density 0.02) 2.0125, worse too. The residual rescaled at each
  round by the learning rate's ratio to the last round's (--decay-lr:
  what it holds was learnt at a higher rate as the cosine falls), up
  and down: 2.4626 / 2.2215 / 2.0901 (stopped; the warm-up swells the
  early residuals); down only (--decay-down): 2.4393 / 2.1984 / 2.0759 /
  2.0093, no better. Nesterov's momentum 0.5 on the anchor's move of
  each round, --outer-lr 1 (the same steady weight, 2 / PEERS):
  2.5696 at step 100 (stopped).
- The interval bounds it, not the density: the mean of all the models
  every 4 steps, dense (all --every 4), 2.4925 / 2.2234 / 2.0858 /
  2.0235 (1.043x) with --outer-lr 1 and 2.1260 with 1.5, where every
  step it gives 1.027x and 1.011x: four steps' moves, less noisy than
  one's, want a smaller weight than √n, and the 4% share with its error
  feedback (2.0079) does better than the whole model. The share more
  often at about the same bytes: every 3 steps on 4% (--decay 0.92,
  about 130x fewer) 1.9998 (1.031x; the mean of the peers 1.9991), every
  2 on 3% (--decay 0.95, about 115x) 2.0105 (1.037x). Each process's
  learning rate doubled with the shares at the mean (--lr 0.004
  --min-lr 0.0004 --outer-lr 1: DDP's step on noise taken in the
  process instead of at the mix) 2.4518 / 2.1971 / 2.0642 / 2.0022
  (1.032x); √2 each (--lr 0.002828 --min-lr 0.0002828 --outer-lr
  1.414) 2.0152.
- Nor the processes' AdamW states: every peer's moments set to their
  mean at every round, an oracle (--mean-adam mv: dense and exact, two
  vectors of the model's size a round), 2.4172 / 2.1894 / 2.0625 / 1.9909
  (1.027x); the first moment alone (--mean-adam m) 2.4472 / 2.2154 /
  2.0815 / 2.0154 (1.039x).
- Nor the shards' skew: with every peer drawing from the whole text
  (--iid), the rule 2.4390 / 2.1995 / 2.0689 / 1.9934 against DDP's
  2.3860 / 2.1446 / 2.0115 / 1.9329 on the same draws (--mix ddp
  --iid): 1.022 / 1.026 / 1.029 / 1.031x, against 1.015 / 1.027 / 1.031
  / 1.035x on the contiguous shards.
- Another compressor, PowerSGD's (--mix lowrank --every 4): rank 4 (in
  fp32 about 39 times fewer values a round than the model; with fp16
  and n - 1 sends about as many bytes as the share above) 2.6794 at step
  100 with --outer-lr 1 and 3.1700 with 2 (stopped); rank 16 (about 10
  times fewer, 4 times the share's bytes) 2.5426 at step 100 with
  --outer-lr 1 (stopped), against the share's 2.4388: AdamW's moves are
  not low-rank enough for it.
- The loop's gradient clipping (torch_charlm.py's --clip 1.0, as DDP's
  loop clips the mean gradient): after the warm-up a peer's gradient on
  its own batch has a norm of 1.0-1.5 and the mean of four (DDP's) 0.6-0.9,
  so the clip scales nearly every peer step and almost no DDP step (each
  shard's gradient norm beside their mean's, every 25 steps of a DDP run
  of seed 1). Neither clipped (--clip 1e9): DDP 2.4395 / 2.2012 /
  2.0609 / 1.9781, the rule (int2, --decay 0.9, 2 / PEERS, --select
  whole, rounds at once, 4% every 4 steps) 2.4579 / 2.2225 / 2.1042 /
  2.0291, 1.026x against 1.035x clipped: about a quarter of the gap is the
  clip's, a part of the loop no mixing rule reaches.
- The shares' weight late in the schedule (--late-outer-lr X from
  --late-step S; the rule as above, which in these runs gave 2.4374 /
  2.2045 / 2.0753 / 2.0067, 2.0079 in the runs above): 3 / PEERS from step
  200 2.0921 at step 300 and 1.9994 at 400 (1.031x); seed 2 2.0157 without
  and 2.0074 with it (1.032x and 1.027x of the live DDP's 1.9542), seed 3
  2.0078 and 1.9970 (1.035x and 1.029x of 1.9406); from step 300 2.0045; 4 / PEERS from step 200 2.1301 / 2.0132; 3 / PEERS
  throughout (--outer-lr 3) 2.5131 / 2.2654 / 2.1198 / 2.0337 (1.049x). A
  heavier weight as the learning rate falls gains 0.4 to 0.6 points at
  step 400 on seeds 1-3 (median 1.029x against 1.035x): a lead, short of
  the 1.5 points the bar wants.
  With the share every 3 steps on 5% (--decay 0.92, about 104x fewer
  bytes) the rule ends at 1.9995 (1.031x) and with the late weight at
  2.0022: the two gains do not add.
- What a round sends (the rule as above, the first 100 steps, peer 0):
  of most of the biases 0.1% to 3% a round (the first block's attention
  output bias 0.17%, 96% of it never), of the first block's attention
  weights 10.6%, of the embeddings and the head 9-12%: a top over the
  whole model starves the small moves of whole tensors. With the tensors
  of at most one dimension whole in every round (--whole-vectors: 13,824
  values, 0.4%; the top of the rest as before) seed 1 ends at 2.4320 /
  2.1939 / 2.0683 / 1.9988 (1.031x, against 2.0067), seed 2 at 2.0048
  (1.026x of the live DDP's 1.9542, against 2.0157, 1.032x) and seed 3
  at 1.9951 (1.028x of 1.9406, against 2.0078, 1.035x): 0.4 to 0.7
  points, a median of 1.028x against 1.035x, for about 9% more bytes.
  A first trial took the vectors beside the top 4% of the whole model
  (a few hundred values more), seed 1: 2.4310 / 2.1962 / 2.0721 /
  2.0020; with the top of each tensor (--select tensor) 2.0018; and
  with the late weight (--late-outer-lr 3 --late-step 200) seeds 1-3
  1.9932, 1.9995 and 1.9913 (1.028x, 1.023x, 1.026x), the vectors
  weighed half and 0.75 as much as the rest 1.9997 and 1.9919 (2.0915
  and 2.0926 at step 300, against 2.0859 at one weight).
- The interval to its end: the whole model's exact mean every 2 steps
  (all --every 2) 2.4579 / 2.1886 / 2.0629 / 2.0006 (1.032x) with
  --outer-lr 1, 2.4837 / 2.2063 / 2.0596 / 1.9960 (1.029x) with 1.25;
  with 1.5 and 2 2.5279 and 2.7194 at step 100 (stopped). Within 2% of
  DDP only the mean every step at 1.5 or 2 (above: 1.011x, 1.002x),
  which sends about a fifth of DDP's bytes even as int2 values to
  every other peer; the share every 4 steps on 4% with --whole-vectors
  (1.031x on this seed) is about as near as the exact mean every 2.
- Compressed gradients every step in place of models (--mix grad, whole
  model, --decay 1): 1% and 4% in fp32 3.3060 and 2.7665 at step 100,
  1% in int2 3.2950 (stopped), against DDP's 2.4033: AdamW steps on the
  mean of sparse gradients learn far less than on the models' moves.
- Twice the batch a peer (--batch 32; --mix ddp on 4 x 32): DDP 2.2737 /
  2.0290 / 1.9012 / 1.8302, the share every 4 on 4% (int2, --decay 0.9,
  --outer-lr 2, --select whole, --whole-vectors) 2.3201 / 2.0687 /
  1.9443 / 1.8830: 1.020 / 1.020 / 1.023 / 1.029x against 1.012 / 1.024
  / 1.028 / 1.031x at batch 16; the gap is not the small batch's noise.
- 800 steps (the schedule stretched, DDP 1.9621 / 1.8216 / 1.7552 at
  steps 400 / 600 / 800): pairs on 4% every 2 steps 2.2159 / 2.0442 /
  1.9702 (1.129x / 1.122x / 1.122x); sparse every 4 on 4%, int8, outer
  1.5: 1.9954 / 1.8850 / 1.8253 (1.017x / 1.035x / 1.040x).
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
def outer_move(anchor, move, mom, outer_lr, mu):
    """The anchor takes the outer step on the mean move: plain, or Nesterov
    (DiLoCo's) with momentum mu kept in mom."""
    if mu > 0:
        mom.mul_(mu).add_(move)
        move = move + mu * mom
    anchor.add_(outer_lr * move)


@torch.no_grad()
def mix_all(peers, anchor, moms, outer_lr, mu):
    """Every peer moves to the anchor after its outer step on the mean move."""
    for k, ps in enumerate(zip(*[list(m.parameters()) for m in peers])):
        outer_move(anchor[k], sum(ps) / len(ps) - anchor[k], moms[k], outer_lr, mu)
        for p in ps:
            p.copy_(anchor[k])


def int8_blocks(v):
    """v rounded as gossipd's int8 values are: one scale per 64 values."""
    pad = (-v.numel()) % 64
    b = torch.nn.functional.pad(v, (0, pad)).view(-1, 64)
    scale = b.abs().amax(dim=1, keepdim=True).clamp_min(1e-30) / 127
    return ((b / scale).round().clamp(-127, 127) * scale).flatten()[:v.numel()]


def int2_blocks(v):
    """v in two bits a value: its sign and one of two magnitudes per 64
    values (the means of the magnitudes below and above the block's mean
    magnitude)."""
    pad = (-v.numel()) % 64
    b = torch.nn.functional.pad(v, (0, pad)).view(-1, 64)
    real = torch.nn.functional.pad(torch.ones_like(v), (0, pad)).view(-1, 64)
    m = b.abs()
    mean = (m * real).sum(dim=1, keepdim=True) / real.sum(dim=1, keepdim=True)
    hi = (m > mean).to(v.dtype) * real
    lo = real - hi
    hi_mag = (m * hi).sum(dim=1, keepdim=True) / hi.sum(dim=1, keepdim=True).clamp_min(1)
    lo_mag = (m * lo).sum(dim=1, keepdim=True) / lo.sum(dim=1, keepdim=True).clamp_min(1)
    return (b.sign() * (hi * hi_mag + lo * lo_mag)).flatten()[:v.numel()]


def sign_blocks(v):
    """v in one bit a value: its sign times the mean magnitude of its block
    of 64 (1-bit Adam's and EF-signSGD's rounding)."""
    pad = (-v.numel()) % 64
    b = torch.nn.functional.pad(v, (0, pad)).view(-1, 64)
    real = torch.nn.functional.pad(torch.ones_like(v), (0, pad)).view(-1, 64)
    mag = b.abs().sum(dim=1, keepdim=True) / real.sum(dim=1, keepdim=True)
    return (b.sign() * mag).flatten()[:v.numel()]


ROUND = {"fp32": lambda v: v, "int8": int8_blocks, "int2": int2_blocks, "sign": sign_blocks}


@torch.no_grad()
def mix_sparse(peers, anchors, moms, residual, pending, a):
    """Top-k of each peer's residual plus move (its values rounded to int8
    with --values int8), from its anchor; the others' shares of --stale
    mixes ago, its own of now."""
    shares = []
    for i, m in enumerate(peers):
        mine = []
        for k, p in enumerate(m.parameters()):
            e = residual[i][k]
            e.mul_(a.decay).add_(p - anchors[i][k])
            n = max(1, int(a.density * e.numel()))
            idx = e.abs().flatten().topk(n).indices
            vals = e.flatten()[idx]
            vals = ROUND[a.values](vals)
            share = torch.zeros_like(e).flatten()
            share[idx] = vals
            share = share.view_as(e)
            e.sub_(share)
            mine.append(share)
        shares.append(mine)
    pending.append(shares)
    late = pending[-1 - a.stale] if len(pending) > a.stale else None
    del pending[:-1 - a.stale]
    for j, m in enumerate(peers):
        for k, p in enumerate(m.parameters()):
            move = shares[j][k].clone()
            for i in range(len(peers)):
                if late is not None and (i != j or a.eager):
                    move.add_(late[i][k])
            move /= len(peers)
            if a.eager:
                # its own share whole now, for the mean not yet known;
                # the last one's mean in place of its own whole share
                move.add_(shares[j][k] * (1 - 1 / len(peers)))
                if late is not None:
                    move.sub_(late[j][k])
            outer_move(anchors[j][k], move, moms[j][k], a.outer_lr, a.outer_momentum)
            p.copy_(anchors[j][k])


class Shares:
    """--mix share: sparse's shares as a network without rounds would
    carry them. Peer I's rounds fall every EVERY steps from its own offset
    (--stagger: I EVERY / PEERS, so the rounds spread over the interval;
    else all at once); at its round it adds its move since then to its
    residual, takes the top --density of each tensor (rounded as --values
    says), moves its anchor by that share times --own-weight (1 / PEERS,
    or 1: its whole share in place of the others' not yet come) and by
    the last share's rest (1 / PEERS - own weight), resets to its anchor,
    and sends the share to each other peer, which it reaches after a
    uniform 0 to --delay steps, or never with chance --loss. A share
    that comes moves the receiver's anchor and model by 1 / PEERS times
    it. Without loss every anchor takes every share once at 1 / PEERS."""

    def __init__(self, a, peers, bounds, rng):
        self.a, self.peers, self.bounds, self.rng = a, peers, bounds, rng
        n = len(peers)
        flat = [torch.nn.utils.parameters_to_vector(m.parameters()).detach() for m in peers]
        self.anchor = [v.clone() for v in flat]
        self.residual = [torch.zeros_like(v) for v in flat]
        self.last = [None] * n
        self.inbox = []
        self.offset = [(i * a.every) // n if a.stagger else 0 for i in range(n)]
        self.own = 1.0 if a.own_weight == "whole" else 1.0 / n
        self.lr = [None] * n
        # --outer-momentum's: the anchor at the last round, and the momentum
        mu = a.outer_momentum > 0
        self.prev = [v.clone() for v in self.anchor] if mu else None
        self.mom = [torch.zeros_like(v) for v in flat] if mu else None
        # --whole-vectors: the coordinates of the tensors of at most one
        # dimension, as the Python module names them to gossipd
        self.whole = None
        if a.whole_vectors:
            at, whole = 0, []
            for p in peers[0].parameters():
                if p.dim() <= 1:
                    whole.append(torch.arange(at, at + p.numel()))
                at += p.numel()
            self.whole = torch.cat(whole) if whole else None

    @torch.no_grad()
    def accrue(self, i, step):
        """Peer I's moves since its last round into its decayed residual."""
        a = self.a
        x = torch.nn.utils.parameters_to_vector(self.peers[i].parameters())
        e = self.residual[i]
        # --decay-lr: what the residual holds was learnt at the rate of
        # the last round; rescaled to this one's (the schedule is the
        # transformer's: cnn_mix.py's share rule takes no --decay-lr)
        f = 1.0
        if a.decay_lr:
            lr = lm.lr_at(a, step)
            f = lr / self.lr[i] if self.lr[i] else 1.0
            if a.decay_down:
                f = min(f, 1.0)
            self.lr[i] = lr
        # x - anchor is the moves since the last round plus the --keep
        # share of the residual; the decay applies to the residual alone
        e.mul_(a.decay * f - a.keep).add_(x - self.anchor[i])

    @torch.no_grad()
    def round(self, i, step, idx=None):
        a, n = self.a, len(self.peers)
        e = self.residual[i]
        if idx is None:
            self.accrue(i, step)
            late = a.late_density and step >= a.late_step
            density, drift = a.late_density if late else a.density, e.abs()
            if self.whole is not None:
                # the vectors whole, and the top of the rest
                drift[self.whole] = -1
                density *= 1 - len(self.whole) / len(drift)
            idx = top_drift(drift, density, self.bounds)
            if self.whole is not None:
                idx = torch.cat([idx, self.whole])
            # in coordinate order, as gossipd's blocks of values are formed
            idx = idx.unique()
        vals = e[idx]
        vals = ROUND[a.values](vals)
        e[idx] -= vals
        heavier = a.late_outer_lr and step >= a.late_step
        vals = vals * (a.late_outer_lr if heavier else a.outer_lr)
        if a.outer_momentum > 0:
            # Nesterov's on the anchor's move of the last round (its own
            # share and the others', the same for every peer when the
            # rounds are at once), before this round's share goes in
            mom = self.mom[i].mul_(a.outer_momentum).add_(self.anchor[i] - self.prev[i])
            self.anchor[i] += a.outer_momentum * mom
            self.prev[i] = self.anchor[i].clone()
        if self.last[i] is not None:
            lidx, lvals = self.last[i]
            self.anchor[i][lidx] += (1.0 / n - self.own) * lvals
        self.anchor[i][idx] += self.own * vals
        self.last[i] = (idx, vals)
        # a copy: vector_to_parameters makes the parameters views of it
        x = self.anchor[i] + a.keep * e
        torch.nn.utils.vector_to_parameters(x, self.peers[i].parameters())
        for j in range(n):
            if j != i and self.rng.random() >= a.loss:
                self.inbox.append((step + self.rng.randint(0, a.delay), j, idx, vals))

    @torch.no_grad()
    def combined(self, due, step):
        """Every peer's share of a round at once, combined per coordinate
        (--combine rms): the sign of their sum times the root of the mean
        of their squares over N, as DDP's AdamW would step where the N
        moves were all its noise or all its signal."""
        a, n = self.a, len(self.peers)
        S = torch.zeros_like(self.anchor[0])
        Q = torch.zeros_like(S)
        for i in due:
            self.accrue(i, step)
            e = self.residual[i]
            idx = top_drift(e.abs(), a.density, self.bounds).sort().values
            vals = ROUND[a.values](e[idx])
            e[idx] -= vals
            S[idx] += vals
            Q[idx] += vals * vals
        move = S.sign() * (Q / n).sqrt()
        for i in due:
            self.anchor[i] += a.outer_lr * move
            torch.nn.utils.vector_to_parameters(self.anchor[i].clone(),
                                                self.peers[i].parameters())

    @torch.no_grad()
    def after_step(self, step):
        n = len(self.peers)
        due = [i for i in range(n) if (step + 1 + self.offset[i]) % self.a.every == 0]
        if self.a.combine != "mean" and due:
            self.combined(due, step)
        elif self.a.support == "sum" and due:
            for i in due:
                self.accrue(i, step)
            tot = sum(self.residual[i] for i in due)
            idx = top_drift(tot.abs(), self.a.density, self.bounds).sort().values
            for i in due:
                self.round(i, step, idx)
        else:
            for i in due:
                self.round(i, step)
        due = [m for m in self.inbox if m[0] <= step]
        self.inbox = [m for m in self.inbox if m[0] > step]
        for _, j, idx, vals in due:
            self.anchor[j][idx] += vals / n
            x = torch.nn.utils.parameters_to_vector(self.peers[j].parameters())
            x[idx] += vals / n
            torch.nn.utils.vector_to_parameters(x, self.peers[j].parameters())


@torch.no_grad()
def mix_lowrank(peers, anchor, residual, qs, a):
    """PowerSGD's compressor (Vogels et al. 2019) on the moves since the
    last mix: each peer adds its move to its residual (error feedback, times
    --decay first); for each matrix the mean of the residuals M is
    approximated as P Q^T with P = orth(M Q), Q = M^T P, Q carried to the
    next mix (one power step a mix; both products are sums over peers, so
    two all-reduces of --rank columns each in a network); vectors go whole.
    Every peer's residual loses the approximation, and every peer moves to
    the anchor plus --outer-lr times it."""
    n = len(peers)
    for k, ps in enumerate(zip(*[list(m.parameters()) for m in peers])):
        es = [residual[i][k] for i in range(n)]
        for e, p in zip(es, ps):
            e.mul_(a.decay).add_(p - anchor[k])
        mean = sum(es) / n
        if mean.dim() < 2:
            approx = mean
        else:
            m2 = mean.reshape(mean.shape[0], -1)
            if qs[k] is None:
                qs[k] = torch.randn(m2.shape[1], a.rank, generator=torch.Generator().manual_seed(k))
            pm = torch.linalg.qr(m2 @ qs[k]).Q
            qs[k] = m2.t() @ pm
            approx = (pm @ qs[k].t()).reshape(mean.shape)
        for e in es:
            e.sub_(approx)
        anchor[k].add_(a.outer_lr * approx)
        for p in ps:
            p.copy_(anchor[k])


@torch.no_grad()
def outer_each(peers, anchors, moms, outer_lr, mu):
    """Each peer's own outer step on its move since its last one (gossipd's
    --outer-lr, --outer-momentum), from its own anchor."""
    for m, anchor, mom in zip(peers, anchors, moms):
        for k, p in enumerate(m.parameters()):
            outer_move(anchor[k], p - anchor[k], mom[k], outer_lr, mu)
            p.copy_(anchor[k])


def pairings(n, how, rng, mixes):
    """The pairs of one mix of N peers, in order, the first of each the
    side that picks (--pairing): random disjoint pairs; disjoint pairs
    taking every partner in turn (the circle method, mix number MIXES);
    or each peer in random order starting one exchange with any other,
    as gossipd's peers do (each starts one and serves about one)."""
    if how == "each":
        order = list(range(n))
        rng.shuffle(order)
        return [(i, rng.choice([j for j in range(n) if j != i])) for i in order]
    if how == "cycle":
        ring = list(range(1, n + n % 2))
        r = mixes % len(ring)
        ring = ring[r:] + ring[:r]
        order = [0] + ring
        pairs = [(order[u], order[len(order) - 1 - u]) for u in range(len(order) // 2)]
        return [(i, j) if rng.random() < 0.5 else (j, i) for i, j in pairs
                if i < n and j < n]
    order = list(range(n))
    rng.shuffle(order)
    return [(order[u], order[u + 1]) for u in range(0, n - 1, 2)]


@torch.no_grad()
def mix_pairs(peers, density, pairs, gen):
    """Pairs average on a random density share of the coordinates."""
    for i, j in pairs:
        a, b = peers[i], peers[j]
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


@torch.no_grad()
def top_drift(drift, density, bounds):
    """The indices of the density share of largest drift: over the whole
    vector, or that share of each [lo, hi) range of bounds."""
    if not bounds:
        return drift.topk(max(1, int(density * drift.numel()))).indices
    return torch.cat([lo + drift[lo:hi].topk(max(1, int(density * (hi - lo)))).indices
                      for lo, hi in bounds])


@torch.no_grad()
def mix_delta(peers, anchors, density, pairs, bounds, gain):
    """In each pair, the first side picks the coordinates whose drift from
    its anchor is largest over the whole model (gossipd's mode delta,
    drift.h) and both average there; both anchor there. With a gain G the
    mean drift is taken G times from the mean anchor instead."""
    for i, j in pairs:
        xi = torch.nn.utils.parameters_to_vector(peers[i].parameters())
        xj = torch.nn.utils.parameters_to_vector(peers[j].parameters())
        idx = top_drift((xi - anchors[i]).abs(), density, bounds)
        mean = (xi[idx] + xj[idx]) / 2
        if gain != 1:
            mean += (gain - 1) * (xi[idx] - anchors[i][idx] + xj[idx] - anchors[j][idx]) / 2
        for x, anchor in ((xi, anchors[i]), (xj, anchors[j])):
            x[idx] = mean
            anchor[idx] = mean
        torch.nn.utils.vector_to_parameters(xi, peers[i].parameters())
        torch.nn.utils.vector_to_parameters(xj, peers[j].parameters())


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


def grad_step(m, opt, shards, residual, a, step):
    """--mix grad's step: each shard's gradient into its peer's residual,
    the top --density of each residual sent, AdamW on the shares' mean."""
    for g in opt.param_groups:
        g["lr"] = lm.lr_at(a, step)
    ps = list(m.parameters())
    mean = torch.zeros_like(residual[0])
    for i, shard in enumerate(shards):
        opt.zero_grad()
        lm.lm_loss(m, lm.batch_at(shard, a, 1000 * i + a.seed, step)).backward()
        with torch.no_grad():
            r = residual[i]
            r.mul_(a.decay).add_(torch.cat([p.grad.flatten() for p in ps]))
            idx = top_drift(r.abs(), a.density, []).sort().values
            vals = ROUND[a.values](r[idx])
            r[idx] -= vals
            mean[idx] += vals / len(shards)
    torch.nn.utils.vector_to_parameters(mean, [p.grad for p in ps])
    torch.nn.utils.clip_grad_norm_(ps, a.clip)
    opt.step()


@torch.no_grad()
def mean_model(peers):
    m = copy.deepcopy(peers[0])
    for p, *ps in zip(m.parameters(), *[x.parameters() for x in peers]):
        p.copy_(sum(ps) / len(ps))
    return m


def add_mix_args(ap):
    """The rules' options (cnn_mix.py takes the same)."""
    ap.add_argument("--peers", type=int, default=4)
    ap.add_argument("--mix", choices=("all", "pairs", "delta", "ddp", "sparse", "share", "lowrank",
                                      "grad"),
                    default="all")
    ap.add_argument("--every", type=int, default=1, metavar="STEPS", help="steps between mixes")
    ap.add_argument("--density", type=float, default=1.0,
                    help="pairs, delta, sparse, share: share of coordinates mixed")
    ap.add_argument("--outer-lr", type=float, default=1.0,
                    help="the outer step's rate (pairs, delta: each peer's own, after each mix; "
                    "share: the factor on every share)")
    ap.add_argument("--select", choices=("whole", "tensor", "chunk"), default=None,
                    help="delta, share: the largest drift over the whole model (gossipd's), "
                    "or the same share of each tensor, or of each 64 Ki-value chunk "
                    "(default: whole for delta, tensor for share)")
    ap.add_argument("--rank", type=int, default=4,
                    help="lowrank: the columns of P and Q")
    ap.add_argument("--values", choices=tuple(ROUND), default="fp32",
                    help="sparse, share: the shares' values as sent (sign: one bit a value, "
                    "the sign times its block's mean magnitude)")
    ap.add_argument("--stale", type=int, default=0, metavar="MIXES",
                    help="sparse: the others' shares arrive this many mixes late")
    ap.add_argument("--eager", action="store_true",
                    help="sparse with --stale: each peer takes its own share whole at once "
                    "in place of the mean it does not know yet, and the mean when it comes "
                    "(DiLoCo's eager updates)")
    ap.add_argument("--own-weight", choices=("mean", "whole"), default="mean",
                    help="share: a peer's own share at 1 / PEERS at once, or whole until "
                    "its next round")
    ap.add_argument("--stagger", action="store_true",
                    help="share: the peers' rounds spread over the interval")
    ap.add_argument("--delay", type=int, default=0, metavar="STEPS",
                    help="share: a share reaches each other peer after 0 to STEPS steps")
    ap.add_argument("--loss", type=float, default=0.0,
                    help="share: the chance a share never reaches a given peer")
    ap.add_argument("--decay", type=float, default=1.0, metavar="B",
                    help="sparse, share: the residual is multiplied by B at each round "
                    "before the move goes in (SparseLoCo's error feedback decays, 0.95)")
    ap.add_argument("--decay-lr", action="store_true",
                    help="share: the residual also follows the learning rate, times "
                    "its ratio to the last round's")
    ap.add_argument("--decay-down", action="store_true",
                    help="share: --decay-lr follows the rate down only")
    ap.add_argument("--support", choices=("own", "sum"), default="own",
                    help="share: each peer sends the top of its own residual, or all "
                    "peers due at once send at the top of their residuals' sum")
    ap.add_argument("--combine", choices=("mean", "rms"), default="mean",
                    help="share, rounds at once without delay: how a round's shares "
                    "combine per coordinate (Shares.combined)")
    ap.add_argument("--flush", action="store_true",
                    help="share: also evaluate peer 0's anchor plus the mean of the "
                    "residuals (times 1 and --outer-lr), as a closing dense round would give")
    ap.add_argument("--keep", type=float, nargs="?", const=1.0, default=0.0, metavar="F",
                    help="share: a peer's model keeps the share F (1 if not given) of what "
                    "its rounds did not send (the anchor plus F times its residual) "
                    "instead of going back to the anchor")
    ap.add_argument("--late-density", type=float, default=0.0, metavar="D",
                    help="share: rounds from step --late-step on send the share D")
    ap.add_argument("--late-step", type=int, default=0, metavar="S")
    ap.add_argument("--late-outer-lr", type=float, default=0.0, metavar="X",
                    help="share: rounds from step --late-step on weigh every share X "
                    "in place of --outer-lr")
    ap.add_argument("--whole-vectors", action="store_true",
                    help="share: every round sends the tensors of at most one dimension "
                    "(biases, norms' gains) whole, and the --density share of the rest "
                    "(gossipd with the Python module)")
    ap.add_argument("--gain", type=float, default=1.0,
                    help="delta: the pair's mean drift taken this many times (1: the mean)")
    ap.add_argument("--outer-momentum", type=float, default=0.0, metavar="MU",
                    help="the outer step's Nesterov momentum (0: none)")
    ap.add_argument("--pairing", choices=("random", "cycle", "each"), default="random",
                    help="pairs, delta: random disjoint pairs, disjoint pairs taking "
                    "every partner in turn, or each peer starting one exchange with "
                    "any other (gossipd's pattern: give it twice the --every)")


def check_mix_args(ap, a):
    if a.peers < 2 or a.every < 1 or not 0 < a.density <= 1 or a.outer_lr <= 0 \
            or not 0 <= a.outer_momentum < 1 or a.stale < 0 or a.gain <= 0 \
            or a.delay < 0 or not 0 <= a.loss < 1 or not 0 <= a.keep <= 1 \
            or not 0 <= a.late_density <= 1 or a.late_outer_lr < 0:
        ap.error("want --peers >= 2, --every >= 1, 0 < --density <= 1, --outer-lr > 0, "
                 "0 <= --outer-momentum < 1, --stale >= 0, --gain > 0, --delay >= 0, "
                 "0 <= --loss < 1, 0 <= --keep <= 1, 0 <= --late-density <= 1, "
                 "--late-outer-lr >= 0")
    if a.rank < 1:
        ap.error("want --rank >= 1")
    if (a.late_density or a.late_outer_lr) and (a.mix != "share" or a.combine != "mean"):
        ap.error("--late-density and --late-outer-lr take --mix share's rounds "
                 "(not --combine rms)")
    if a.whole_vectors and (a.mix != "share" or a.combine != "mean" or a.support != "own"):
        ap.error("--whole-vectors takes --mix share's own rounds (not --combine rms or "
                 "--support sum)")
    if a.decay_down and not a.decay_lr:
        ap.error("--decay-down qualifies --decay-lr, which is not given")
    if a.mix == "share" and a.outer_momentum > 0 and (a.stagger or a.delay or a.loss):
        ap.error("--mix share takes --outer-momentum with every round at once only")
    if (a.combine != "mean" or a.support != "own") and \
            (a.stagger or a.delay or a.loss or a.keep or a.own_weight != "mean"):
        ap.error("--combine and --support want every round at once, whole: no --stagger, "
                 "--delay, --loss, --keep or --own-weight whole")


class Mixer:
    """What rule --mix keeps between mixes, for peers that all start at
    START (--mix ddp: one model, nothing to mix), and its mix."""

    def __init__(self, a, start):
        self.a = a
        self.peers = [copy.deepcopy(start)
                      for _ in range(1 if a.mix in ("ddp", "grad") else a.peers)]
        self.anchor = [p.detach().clone() for p in start.parameters()]
        self.rng, self.gen = random.Random(a.seed), torch.Generator().manual_seed(a.seed)
        self.residual = [[torch.zeros_like(p) for p in self.anchor] for _ in self.peers]
        self.moms = [torch.zeros_like(p) for p in self.anchor]
        self.anchors = [[p.clone() for p in self.anchor] for _ in self.peers]
        self.pmoms = [[torch.zeros_like(p) for p in self.anchor] for _ in self.peers]
        self.pending = []
        self.qs = [None] * len(self.anchor)
        self.mixes = 0
        self.flat = [torch.nn.utils.parameters_to_vector(m.parameters()).detach().clone()
                     for m in self.peers]
        sizes = [p.numel() for p in start.parameters()]
        ends = [sum(sizes[:i + 1]) for i in range(len(sizes))]
        tensors = list(zip([0] + ends[:-1], ends))
        self.bounds = {"whole": [],
                       "tensor": tensors,
                       "chunk": [(lo, min(lo + 65536, ends[-1]))
                                 for lo in range(0, ends[-1], 65536)]
                       }[a.select or ("tensor" if a.mix == "share" else "whole")]
        if a.mix == "share":
            self.shares = Shares(a, self.peers, self.bounds, self.rng)
        self.grad_residual = [torch.zeros_like(self.flat[0])
                              for _ in range(a.peers if a.mix == "grad" else 0)]

    def after_step(self, step):
        """The mix due after STEP (0-based), if one is."""
        a = self.a
        if a.mix == "share":
            self.shares.after_step(step)
            return
        if a.mix in ("ddp", "grad") or (step + 1) % a.every:
            return
        if a.mix == "all":
            mix_all(self.peers, self.anchor, self.moms, a.outer_lr, a.outer_momentum)
        elif a.mix == "lowrank":
            mix_lowrank(self.peers, self.anchor, self.residual, self.qs, a)
        elif a.mix == "sparse":
            mix_sparse(self.peers, self.anchors, self.pmoms, self.residual, self.pending, a)
        else:
            pairs = pairings(len(self.peers), a.pairing, self.rng, self.mixes)
            self.mixes += 1
            if a.mix == "delta":
                mix_delta(self.peers, self.flat, a.density, pairs, self.bounds, a.gain)
            else:
                mix_pairs(self.peers, a.density, pairs, self.gen)
            if a.outer_lr != 1 or a.outer_momentum > 0:
                outer_each(self.peers, self.anchors, self.pmoms, a.outer_lr, a.outer_momentum)


@torch.no_grad()
def mean_adam(peers, opts, which):
    """--mean-adam: every peer's AdamW moments named by WHICH set to their mean."""
    keys = ("exp_avg", "exp_avg_sq") if which == "mv" else ("exp_avg",)
    for ps in zip(*[list(m.parameters()) for m in peers]):
        for key in keys:
            bufs = [o.state[p][key] for o, p in zip(opts, ps)]
            mean = sum(bufs) / len(bufs)
            for b in bufs:
                b.copy_(mean)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    lm.add_training_args(ap)
    # charlm.sh's settings where they are not torch_charlm.py's defaults,
    # so that every figure here sits beside charlm.sh's DDP as it is run
    ap.set_defaults(steps=400, warmup=40, context=64)
    add_mix_args(ap)
    ap.add_argument("--mean-adam", choices=("m", "mv"),
                    help="every EVERY steps, after the mix, every peer's AdamW first "
                    "moment (m) or both moments (mv) set to their mean (an oracle: dense "
                    "and exact)")
    ap.add_argument("--iid", action="store_true",
                    help="every peer (and ddp's every shard) draws its batches from the "
                    "whole training part, not its contiguous shard")
    a = ap.parse_args()
    check_mix_args(ap, a)
    if a.mean_adam and (a.mix in ("ddp", "grad") or a.stagger):
        ap.error("--mean-adam wants one mix of every peer at once (not ddp or grad, no --stagger)")
    torch.set_num_threads(a.threads)
    train, val, vocab = lm.load_corpus(a.corpus)
    vx = lm.val_windows(val, a)
    torch.manual_seed(a.seed)
    mixer = Mixer(a, lm.CharLM(len(vocab), a.width, a.layers, a.heads, a.context))
    peers = mixer.peers
    opts = [lm.make_optimizer(a, m) for m in peers]
    shards = [train if a.iid else train[slice(*lm.shard_range(len(train), i, a.peers))]
              for i in range(a.peers)]
    for step in range(a.steps):
        if a.mix == "ddp":
            ddp_step(peers[0], opts[0], shards, a, step)
        elif a.mix == "grad":
            grad_step(peers[0], opts[0], shards, mixer.grad_residual, a, step)
        else:
            for i, (m, opt) in enumerate(zip(peers, opts)):
                local_step(m, opt, shards[i], 1000 * i + a.seed, a, step)
            mixer.after_step(step)
            if a.mean_adam and (step + 1) % a.every == 0:
                mean_adam(peers, opts, a.mean_adam)
        if (step + 1) % a.eval_every == 0 or step + 1 == a.steps:
            print("step %d val_loss peer0 %.4f mean %.4f" % (
                step + 1, lm.evaluate(peers[0], vx, a.batch),
                lm.evaluate(mean_model(peers), vx, a.batch)), flush=True)
            if a.mix == "share" and a.flush:
                sh = mixer.shares
                for f in sorted({1.0, a.outer_lr}):
                    m = copy.deepcopy(peers[0])
                    x = sh.anchor[0] + f * sum(sh.residual) / len(peers)
                    torch.nn.utils.vector_to_parameters(x, m.parameters())
                    print("  flush x%.1f %.4f" % (f, lm.evaluate(m, vx, a.batch)), flush=True)


if __name__ == "__main__":
    main()
