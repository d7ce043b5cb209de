#!/usr/bin/python3
"""A small GPT-style character language model, trained the usual PyTorch way
(AdamW, warm-up then cosine, gradient clipping), with its parameters shared
with a gossipd peer started with --trainer external:

    gossipd --trainer external --listen ... --peers ... --control /tmp/gd/a.sock &
    PYTHONPATH=src/python contrib/examples/torch_charlm.py --socket /tmp/gd/a.sock --shard 0/4

The gossipd lines are marked "gossipd:". Without --socket (or with
--no-gossip) it runs the same loop alone. AdamW's moments stay in this
process: only the parameters are shared, and the daemon mixes them.

The text is the English fortune cookies of Debian's package "fortunes"
(/usr/share/games/fortunes: about 2.5 MB of quotations, jokes, poems and
definitions, plain files). The cookies are read from every file but
ascii-art (pictures, not prose), with the overstriking of some files (X^HX)
and control characters other than newline and tab removed, put in one fixed
pseudo-random order (the same in every process, whatever --seed says) and
joined with "%" lines as in the files. The first 90% of the characters are
the training part, the last 10% the validation part. --shard I/N trains on
the I-th of N contiguous parts of the training part; since the cookies are
in no topic order the parts are alike (iid). The vocabulary is every
character of the text (about 110).

The model: token and position embeddings, --layers pre-LayerNorm blocks of
causal multi-head self-attention and a 4x MLP (GELU), a final LayerNorm and
a linear head to the vocabulary; GPT-2's initialisation (normal 0.02, the
residual projections scaled by 1/sqrt(2 layers)). AdamW (weight decay on
the matrices and embeddings only), --warmup steps of linear warm-up, then
cosine from --lr down to --min-lr at --steps; the gradient's norm is clipped
to --clip.

Each step takes --batch random windows of --context + 1 characters from the
shard, drawn by a generator seeded from --data-seed and the step number, so
that a process continuing at any step takes the batches the previous one
would have taken; --data-seed defaults to --seed + 1000 * I and must differ
between the peers of a job, while --seed (the model's initialisation) must
be the same for all of them. Training continues from the step the peer
reports when it already holds the job's model (an earlier process, a
checkpoint, a joiner's pull).

The validation loss is the mean cross-entropy (nats per character) over
--eval-batches fixed windows of the validation part (the same windows in
every process and system), every --eval-every steps and at the end. Text
lines by default; with --json one JSON object a line, "ev" saying which:
start (t is unix time, params, steps), eval (step, t, val_loss, train_loss:
the mean training loss since the last eval, bytes_sent: the peer's
bytes_sent at that moment when attached, else null), done (step, steps
trained by this process, val_loss, the loop's time split into evaluations
and peer.step() calls, time per step, the peer's last bytes_sent and mixes).

Speed on one thread of this machine's CPU (PyTorch 1.13): the defaults
(4 layers, 256 wide, context 128, batch 16: 3.2 M parameters) take about
0.7 s a step; the --width 128 --context 64 of contrib/bench/charlm.sh
(0.8 M) about 0.1 s.

The corpus, model, batches, schedule and evaluation are importable
(contrib/bench/ddp_charlm.py trains the same model with PyTorch DDP):
load_corpus, CharLM, make_optimizer, lr_at, batch_at, val_windows,
evaluate, shard_range, add_training_args.
"""
import argparse
import json
import math
import os
import re
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import gossipd

CORPUS = "/usr/share/games/fortunes"
SKIP = ("ascii-art",)           # pictures, not prose
SPLIT_SEED = 20240531           # the cookies' fixed order, whatever --seed
VAL_SEED = 7                    # the validation windows, whatever --seed


def load_corpus(path=CORPUS):
    """(train, val, vocab): the two parts of the text as int64 tensors of
    vocabulary indices, and the vocabulary (a string of its characters)."""
    try:
        names = sorted(n for n in os.listdir(path)
                       if not n.endswith((".dat", ".u8")) and n not in SKIP
                       and os.path.isfile(os.path.join(path, n))
                       and not os.path.islink(os.path.join(path, n)))
    except OSError as e:
        sys.exit("torch_charlm.py: %s: %s (apt-get install fortunes)" % (path, e.strerror))
    cookies = []
    for n in names:
        with open(os.path.join(path, n), "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
        text = re.sub(r".\x08", "", text)                    # overstriking: X^HX, _^HX
        text = re.sub(r"[\x00-\x08\x0b-\x1f\x7f]", "", text)   # other control characters
        cookies += [c.strip("\n") for c in re.split(r"^%\n", text, flags=re.M)]
    cookies = [c for c in cookies if c.strip()]
    if not cookies:
        sys.exit("torch_charlm.py: no text under %s (apt-get install fortunes)" % path)
    order = torch.randperm(len(cookies), generator=torch.Generator().manual_seed(SPLIT_SEED))
    text = "".join(cookies[k] + "\n%\n" for k in order.tolist())
    vocab = "".join(sorted(set(text)))
    index = {c: k for k, c in enumerate(vocab)}
    data = torch.tensor([index[c] for c in text], dtype=torch.int64)
    cut = len(data) * 9 // 10
    return data[:cut], data[cut:], vocab


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attention(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(width)
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)
        self.ln2 = nn.LayerNorm(width)
        self.fc = nn.Linear(width, 4 * width)
        self.out = nn.Linear(4 * width, width)

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class CharLM(nn.Module):
    """Token + position embeddings, LAYERS blocks, final LayerNorm, linear head."""

    def __init__(self, vocab, width=256, layers=4, heads=4, context=128):
        super().__init__()
        if width % heads:
            raise ValueError("width %d is not a multiple of heads %d" % (width, heads))
        self.context = context
        self.tok = nn.Embedding(vocab, width)
        self.pos = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)
        for b in self.blocks:           # GPT-2: residual projections scaled down
            nn.init.normal_(b.proj.weight, 0.0, 0.02 / math.sqrt(2 * layers))
            nn.init.normal_(b.out.weight, 0.0, 0.02 / math.sqrt(2 * layers))

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln_f(x))


def lm_loss(model, xy):
    """Mean cross-entropy of predicting xy[:, 1:] from xy[:, :-1]."""
    logits = model(xy[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), xy[:, 1:].reshape(-1))


def make_optimizer(args, model):
    """AdamW, weight decay on the matrices and embeddings (dim >= 2) only."""
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": args.weight_decay},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=args.lr, betas=(0.9, args.beta2))


def lr_at(args, step):
    """The learning rate of STEP (0-based): linear warm-up over --warmup steps,
    then cosine from --lr down to --min-lr at --steps."""
    if step < args.warmup:
        return args.lr * (step + 1) / args.warmup
    p = min(1.0, (step - args.warmup) / max(1, args.steps - args.warmup))
    return args.min_lr + (args.lr - args.min_lr) * 0.5 * (1.0 + math.cos(math.pi * p))


def windows(data, starts, length):
    return torch.stack([data[s:s + length] for s in starts.tolist()])


def batch_at(data, args, data_seed, step):
    """STEP's batch: --batch random windows of --context + 1 characters of
    DATA, the same for the same (DATA_SEED, STEP) in any process."""
    g = torch.Generator().manual_seed(data_seed * 1000003 + step)
    starts = torch.randint(0, len(data) - args.context - 1, (args.batch,), generator=g)
    return windows(data, starts, args.context + 1)


def val_windows(val, args):
    """--eval-batches x --batch fixed windows of the validation part."""
    g = torch.Generator().manual_seed(VAL_SEED)
    n = args.eval_batches * args.batch
    starts = torch.randint(0, len(val) - args.context - 1, (n,), generator=g)
    return windows(val, starts, args.context + 1)


@torch.no_grad()
def evaluate(model, vx, batch):
    """Mean cross-entropy per character of MODEL over the windows VX."""
    model.eval()
    total = 0.0
    for k in range(0, len(vx), batch):
        total += lm_loss(model, vx[k:k + batch]).item() * len(vx[k:k + batch])
    model.train()
    return total / len(vx)


def shard(arg):
    i, _, n = arg.partition("/")
    try:
        i, n = int(i), int(n)
    except ValueError:
        raise argparse.ArgumentTypeError("shard %s: want I/N" % arg) from None
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError("shard %s: want I/N with 0 <= I < N" % arg)
    return i, n


def shard_range(count, i, n):
    """[lo, hi) of the I-th of N contiguous parts of COUNT characters."""
    return count * i // n, count * (i + 1) // n


def add_training_args(ap):
    """The options of the model, the data and the optimisation."""
    ap.add_argument("--steps", type=int, default=2000, help="training steps (the schedule's length)")
    ap.add_argument("--batch", type=int, default=16, help="windows per step")
    ap.add_argument("--context", type=int, default=128, help="characters a window predicts")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--width", type=int, default=256, help="embedding width")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--lr", type=float, default=2e-3, help="peak learning rate")
    ap.add_argument("--min-lr", type=float, default=2e-4, help="learning rate at --steps")
    ap.add_argument("--warmup", type=int, default=100, help="steps of linear warm-up")
    ap.add_argument("--weight-decay", type=float, default=0.1)
    ap.add_argument("--beta2", type=float, default=0.99, help="AdamW's second beta")
    ap.add_argument("--clip", type=float, default=1.0, help="clip the gradient's norm to this")
    ap.add_argument("--seed", type=int, default=1,
                    help="model initialisation; the same for every peer of a job")
    ap.add_argument("--data-seed", type=int, default=None,
                    help="batch draws; different for each peer (default: seed + 1000 * I)")
    ap.add_argument("--eval-every", type=int, default=100, metavar="STEPS",
                    help="validation loss every STEPS steps and at the end (0: at the end only)")
    ap.add_argument("--eval-batches", type=int, default=8,
                    help="validation windows: this many batches of --batch")
    ap.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    ap.add_argument("--device", default="cpu", help="where the model trains: cpu or cuda[:N]")
    ap.add_argument("--corpus", default=CORPUS, help="directory of the fortune files")


def emit(**kw):
    print(json.dumps(kw), flush=True)


def main():
    ap = argparse.ArgumentParser(description="A small character-level transformer LM, its "
                                 "parameters shared with a gossipd peer started with "
                                 "--trainer external.")
    ap.add_argument("--socket", help="the peer's control socket; without it the model "
                    "trains alone")
    ap.add_argument("--shard", type=shard, default=(0, 1), metavar="I/N",
                    help="train on the I-th of N contiguous parts of the training text")
    add_training_args(ap)
    ap.add_argument("--log-every", type=int, default=50, metavar="STEPS")
    ap.add_argument("--no-gossip", action="store_true",
                    help="train alone even with --socket")
    ap.add_argument("--name", help="this process's name in the peer's status")
    ap.add_argument("--json", action="store_true",
                    help="JSON lines (start, eval, done events) instead of the text lines")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    train, val, vocab = load_corpus(args.corpus)
    i, n = args.shard
    lo, hi = shard_range(len(train), i, n)
    train = train[lo:hi]
    data_seed = args.data_seed if args.data_seed is not None else args.seed + 1000 * i
    vx = val_windows(val, args).to(args.device)

    torch.manual_seed(args.seed)        # before the model: every peer starts alike
    model = CharLM(len(vocab), args.width, args.layers, args.heads, args.context).to(args.device)
    opt = make_optimizer(args, model)   # its state (Adam's moments) stays here
    params = sum(p.numel() for p in model.parameters())
    peer = None
    step = 0
    if args.socket and not args.no_gossip:
        # gossipd: share the parameters with the peer.
        peer = gossipd.attach(model, socket=args.socket,
                              name=args.name or "torch_charlm.py %d/%d" % (i, n))
        if not peer.fresh:
            step = peer.step_count      # the job's model: continue where it is
    if args.json:
        emit(ev="start", t=time.time(), step=step, steps=args.steps, params=params,
             vocab=len(vocab), train_chars=len(train), val_chars=len(val),
             attached=peer is not None, fresh=peer.fresh if peer else None)
    else:
        print("%d parameters, vocabulary %d, shard %d/%d: %d training characters, %d "
              "validation; %s, step %d" % (
                  params, len(vocab), i, n, len(train), len(val),
                  "alone" if not peer else "attached, " + (
                      "fresh" if peer.fresh else "the job's model"), step), flush=True)

    t0 = time.perf_counter()
    start, losses, val_loss, evaluated = step, [], None, -1
    eval_s, peer_s = 0.0, 0.0
    while step < args.steps:
        xy = batch_at(train, args, data_seed, step).to(args.device)
        for group in opt.param_groups:
            group["lr"] = lr_at(args, step)
        opt.zero_grad(set_to_none=True)
        loss = lm_loss(model, xy)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        opt.step()
        step += 1
        losses.append(loss.item())
        # gossipd: a step boundary, right after the optimizer's step as
        # DDP's all-reduce is before it, so an evaluation of step S sees
        # the mixes of step S; False when the peer is leaving.
        if peer:
            tp = time.perf_counter()
            going = peer.step(loss=losses[-1], samples=args.batch)
            peer_s += time.perf_counter() - tp
            if not going:
                if not args.json:
                    print("the peer is leaving: training ends at step %d" % step, flush=True)
                break

        if step == args.steps or (args.eval_every and step % args.eval_every == 0):
            te = time.perf_counter()
            val_loss, evaluated = evaluate(model, vx, args.batch), step
            train_loss = sum(losses) / len(losses)
            if args.json:
                # The peer's traffic at the moment of this evaluation.
                sent = peer.status().get("bytes_sent") if peer else None
                emit(ev="eval", step=step, t=time.time(), val_loss=val_loss,
                     train_loss=train_loss, bytes_sent=sent)
            else:
                print("step %d train loss %.4f val loss %.4f%s" % (
                    step, train_loss, val_loss, " mixes %d" % peer.mixes if peer else ""),
                    flush=True)
            losses = []
            eval_s += time.perf_counter() - te
        elif not args.json and args.log_every and step % args.log_every == 0:
            print("step %d train loss %.4f" % (step, sum(losses[-args.log_every:]) /
                                               len(losses[-args.log_every:])), flush=True)
    took = time.perf_counter() - t0

    sent = mixes = None
    if peer:
        sent, mixes = peer.status().get("bytes_sent"), peer.mixes
        peer.close()        # gossipd: detach; the model keeps its values
    if evaluated != step:
        val_loss = evaluate(model, vx, args.batch)
    steps = step - start
    per_step = (took - eval_s) / steps if steps else None
    if args.json:
        emit(ev="done", t=time.time(), step=step, steps=steps, val_loss=val_loss,
             params=params, loop_s=took, eval_s=eval_s, peer_step_s=peer_s,
             step_s=per_step, bytes_sent=sent, mixes=mixes)
    else:
        if steps:
            print("trained %d steps in %.1f s: %.3f s a step without evaluations "
                  "(%.3f s of it in peer.step())" % (steps, took, per_step, peer_s / steps),
                  flush=True)
        print("final val loss %.4f" % val_loss, flush=True)


if __name__ == "__main__":
    try:
        main()
    except gossipd.AttachError as e:
        sys.exit("torch_charlm.py: %s" % e)
