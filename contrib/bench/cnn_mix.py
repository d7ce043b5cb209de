#!/usr/bin/python3
"""The bound a mixing rule puts on the attached CNN's steps to a target,
without a network: PEERS copies of contrib/examples/torch_cnn.py's model
in one process, as contrib/bench/attach.sh trains them (each its own SGD
with momentum, its contiguous shard I/PEERS, the batch order torch_cnn.py
draws for it, the same warm-up and cosine schedule over --epochs, one
initial model), mixed exactly after every EVERY steps by one of
contrib/bench/charlm_mix.py's rules (its header says what each does and
what it sends):

  all, pairs, delta,          charlm_mix.py's, with its options (its
  sparse, share               Mixer, the same code)
  ddp                         one model on the mean of the PEERS shards'
                              gradients each step (attach.sh's DDP)

Every --eval-every steps it prints each peer's accuracy on the first
--eval-samples test images, as attach.sh's trainers evaluate, and at the
end the first step at which each peer reached --target: beside attach.sh's
DDP at equal steps, the step ratio a rule can reach at best.

    cnn_mix.py --mix sparse --every 4 --density 0.04 --outer-lr 1.5 --values int8

The defaults are attach.sh's settings (its 12 epochs' schedule, stopped
at step 1,000, evaluations every 50 steps on 2,000 images). Measured so
on this 2-core machine, seed 1, one run each, the steps at which the 4
peers first reached 0.90:
- ddp 500 (attach.sh's DDP, seed 1: 500 as well); all every step 500;
- all every 4 steps (dense local SGD, 16x fewer bytes than DDP):
  550-600 (1.2x);
- sparse every 4 on 4%, int8, --outer-lr 1.5 (SparseLoCo's rule, about
  100x fewer bytes): 450-600 (1.2x);
- the same with the others' shares one mix late (--stale 1, each
  applied a whole round after it was made): never; the peers swing
  between 0.53 and 0.79 to the end (shares applied where they land,
  --mix share, need no barrier: below);
- delta every 2 on 4% (gossipd's defaults, exchanges every 4 steps):
  500-650 (1.3x), where attach.sh's live peers took 550-800 (1.6x): the
  rule costs 0.3x, the live job's delays as much again.
The first step at 0.90 is a coarse measure: 0.90 lies where the curve
flattens, and DDP's own evaluations go 0.9015, 0.9085, 0.9085, 0.9065,
0.8880 over steps 500-700. The last line is a finer one: each peer's
mean accuracy over the evaluations from --mean-from (DDP 0.9028, seed 1).

Seeds 1-3 (DDP's first 0.90 at 500, 500, 450), the worst peer's first
step at 0.90 / DDP's; the worst peer's mean from step 300:
- delta every 2 on 4%: 1.3, 1.3, 1.67; 0.8946, 0.8932, 0.8914. With
  --pairing cycle 1.6, 1.4, 1.56; 0.8933, 0.8928, 0.8896; with
  --pairing each --every 4 1.2, 1.5, 1.56; 0.8949, 0.8923, 0.8929;
  on 8% (as many bytes as sparse's below): 1.3, 1.3, 1.44; 0.8936,
  0.8940, 0.8941;
- sparse every 4 on 4%, int8, --outer-lr 1: 0.8, 0.8, 1.11; 0.9017,
  0.9002, 0.9007; with --stale 1, seed 1: never, 0.8636; with --stale 1
  --eager: 1.1, 1.2, 1.33; 0.8972, 0.8967, 0.8970;
- share every 4 on 4%, int8, --stagger: 1.1, 1.2, 1.22; 0.8952, 0.8972,
  0.8987; with --delay 3: 1.3, 1.2, 1.33; 0.8942, 0.8971, 0.8957; the
  rounds at once with --delay 3: 1.0, 1.3, 1.33; 0.8990, 0.8958, 0.8985
  (--own-weight whole, seed 1: 1.2, 0.8982); --stagger --loss 0.05,
  seed 1: 1.2, 0.8971.
At --peers 8, seed 1 (DDP 450, 0.9075): share --stagger 250-450 (1.0x),
worst 0.9045; delta every 2 on 4% 400-600 (1.33x), worst 0.8999.

Where the figures above evaluate: after the step's mix, so that at a
multiple of EVERY every peer holds the mixed model. torch_cnn.py
evaluates before peer.step(), the boundary where its round comes: its
own model, EVERY steps past its last round at a multiple of EVERY (two at
step 50 with EVERY 4). --eval-first evaluates there. gossipd's setting
for attach.sh (share every 4 on 2%, int2, the rounds at once as
--share-sync holds them), seeds 1-3, worst peer's first step at 0.90 /
DDP's and its mean from step 300 (DDP 0.903-0.904):
- after the mix: 1.0, 0.8, 1.11; 0.9009, 0.9002, 0.9004;
- --eval-first: 1.2, 1.3, 1.44; 0.8931, 0.8907, 0.8917, as the live job
  (attach.sh, README: 1.27, 1.30, 1.22; 0.891, 0.890, 0.895): the live
  job learns what its rule allows, and what it loses to DDP is in each
  process's last few steps of its own (single batches of 64 at SGD's lr
  0.05 with momentum 0.9, where DDP's steps take the mean of 4). No
  setting of the rule tried takes it back (--eval-first, seeds 1 and 2):
  4% 1.5 (seed 1), 0.8927; every 2 steps on 1% 1.5, 1.3, 0.8875, 0.8878;
  --mean-momentum 1.3, 1.3, 0.8960, 0.8934 (+0.3 points: the momentum is
  a small part of it). Whole models averaged every 4 steps (all --every
  4, 16x fewer bytes than DDP) lose as much: 1.5, 1.3, 0.8939, 0.8915.
  It is the local steps, not the sparse shares.
- --eval-first --eval-anchor (each peer's anchor, the job's model as it
  knows it, evaluated where torch_cnn.py evaluates, as the Python module
  now has a loop do at model.eval(): gossipd-attach(7), evaluate), seeds
  1 and 2: 0.9, 0.9 (450 and 450 against DDP's 500 and 500); 0.9068,
  0.9051, above DDP's 0.9028 (seed 1): what the job learnt is there, and
  the loss was in evaluating each process's own last steps.
"""
import argparse
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
sys.path.insert(0, os.path.join(here, "..", "examples"))
sys.path.insert(0, os.path.join(here, "..", "..", "src", "python"))
import charlm_mix as mix  # noqa: E402
import torch_cnn as cnn  # noqa: E402


def batch(x, y, lo, hi, a, i, step, per_epoch):
    """Peer I's batch of STEP from its shard [lo, hi), as torch_cnn.py
    takes it."""
    epoch, b = divmod(step, per_epoch)
    order = cnn.batch_order(hi - lo, a.seed, i, epoch)
    idx = lo + order[b * a.batch:(b + 1) * a.batch]
    return x[idx], y[idx]


def sgd_step(m, opt, batches, lr):
    """One step on the mean gradient of BATCHES (one: a peer's own)."""
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad()
    for bx, by in batches:
        (torch.nn.functional.cross_entropy(m(bx), by) / len(batches)).backward()
    opt.step()


@torch.no_grad()
def mix_step(a, mixer, opts, step):
    """The rule's mix after STEP, and --mean-momentum's."""
    mixer.after_step(step)
    if not a.mean_momentum or (step + 1) % a.every:
        return
    params = [list(m.parameters()) for m in mixer.peers]
    for ps in zip(*params):
        bufs = [opt.state[p]["momentum_buffer"] for opt, p in zip(opts, ps)]
        mean = sum(bufs) / len(bufs)
        for b in bufs:
            b.copy_(mean)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    cnn.add_training_args(ap)
    # attach.sh's settings (its train=(...) and EVAL_SAMPLES), stopped
    # once its DDP is past 0.90.
    ap.set_defaults(channels=(32, 64), epochs=12, lr_schedule="cosine", warmup_epochs=0.5,
                    weight_decay=5e-4, eval_every=50, eval_samples=2000)
    mix.add_mix_args(ap)
    ap.add_argument("--stop", type=int, default=1000, metavar="STEP",
                    help="stop at this step of the schedule (0: its end)")
    ap.add_argument("--target", type=float, default=0.90, help="the accuracy to reach")
    ap.add_argument("--mean-from", type=int, default=300, metavar="STEP",
                    help="the mean accuracy printed at the end is over evaluations from here")
    ap.add_argument("--eval-first", action="store_true",
                    help="evaluate before the step's mix, where torch_cnn.py does (before "
                         "peer.step()): each peer's own model, up to EVERY steps past its "
                         "last mix")
    ap.add_argument("--eval-anchor", action="store_true",
                    help="with --eval-first and share: evaluate each peer's anchor, the "
                         "job's model as that peer knows it")
    ap.add_argument("--mean-momentum", action="store_true",
                    help="every EVERY steps, after the mix, every peer's SGD momentum "
                         "buffers set to their mean (an oracle: dense and exact)")
    a = ap.parse_args()
    mix.check_mix_args(ap, a)
    if a.stop < 0:
        ap.error("want --stop >= 0")
    if a.decay_lr or a.mix == "grad":
        ap.error("--decay-lr and --mix grad are the transformer's trials, not this CNN's")
    if a.mean_momentum and (a.mix == "ddp" or a.stagger or not a.momentum):
        ap.error("--mean-momentum wants SGD's momentum and one mix of every peer at once "
                 "(not ddp, no --stagger)")
    if a.eval_anchor and (a.mix != "share" or not a.eval_first):
        ap.error("--eval-anchor evaluates mode share's anchors where --eval-first evaluates "
                 "(--mix share --eval-first)")
    torch.set_num_threads(a.threads)
    x, y = cnn.load(a.data, "train")
    tx, ty = cnn.load(a.data, "t10k")
    if a.eval_samples:
        tx, ty = tx[:a.eval_samples], ty[:a.eval_samples]
    ranges = [cnn.shard_range(len(x), i, a.peers) for i in range(a.peers)]
    per_epoch = (ranges[0][1] - ranges[0][0]) // a.batch
    total = int(per_epoch * a.epochs)
    stop = min(total, a.stop) if a.stop else total
    torch.manual_seed(a.seed)
    mixer = mix.Mixer(a, cnn.CNN(*a.channels))
    peers = mixer.peers
    opts = [cnn.make_optimizer(a, m.parameters()) for m in peers]
    hit = [None] * len(peers)
    late = []
    for step in range(stop):
        lr = cnn.lr_at(a, step, total, per_epoch)
        if a.mix == "ddp":
            sgd_step(peers[0], opts[0], [batch(x, y, lo, hi, a, i, step, per_epoch)
                                         for i, (lo, hi) in enumerate(ranges)], lr)
        else:
            for i, (m, opt) in enumerate(zip(peers, opts)):
                sgd_step(m, opt, [batch(x, y, *ranges[i], a, i, step, per_epoch)], lr)
            if not a.eval_first:
                mix_step(a, mixer, opts, step)
        if (step + 1) % a.eval_every == 0 or step + 1 == stop:
            if a.eval_anchor:
                accs = []
                for i, m in enumerate(peers):
                    own = torch.nn.utils.parameters_to_vector(m.parameters()).detach().clone()
                    torch.nn.utils.vector_to_parameters(mixer.shares.anchor[i], m.parameters())
                    accs.append(cnn.evaluate(m, tx, ty)[0])
                    torch.nn.utils.vector_to_parameters(own, m.parameters())
            else:
                accs = [cnn.evaluate(m, tx, ty)[0] for m in peers]
            for i, acc in enumerate(accs):
                if hit[i] is None and acc >= a.target:
                    hit[i] = step + 1
            if step + 1 >= a.mean_from:
                late.append(accs)
            print("step %d acc %s" % (step + 1, " ".join("%.4f" % v for v in accs)), flush=True)
        if a.eval_first and a.mix != "ddp":
            mix_step(a, mixer, opts, step)
    print("steps to %.2f: %s" % (a.target, " ".join(str(h) if h else "-" for h in hit)))
    if late:
        means = [sum(col) / len(col) for col in zip(*late)]
        print("mean accuracy from step %d: %s; worst %.4f" % (
            a.mean_from, " ".join("%.4f" % v for v in means), min(means)))


if __name__ == "__main__":
    main()
