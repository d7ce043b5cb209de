#!/usr/bin/python3
"""tests/attach_evaluate.sh's process: attaches contrib/examples/torch_cnn.py's
CNN (seed 1) to a peer, takes SGD steps on the first images of the
training set, and after each step named by --at evaluates as a loop does:
model.eval(), a forward, another, model.train(), a forward in training
mode. Prints one JSON line per evaluation:

  {"step": S, "job": J, "twice": T, "restored": R, "mixed": M}

J: the eval-mode forward saw values other than the process's own (the
job's model); T: the second eval-mode forward saw the same values as the
first; R: after the training-mode forward the values are the own ones
again, bit for bit; M: mixes the daemon applied in between (peer.mixes).
With --then, after the last evaluation it evaluates between an
optimizer step and its peer.step() (model.eval(), a forward,
model.train(), peer.step(), as torch_cnn.py does) and prints
{"own_at_step": O}, O: the values after peer.step() are the own ones
again; then takes a step in eval mode, and a training-mode forward, and
prints {"trained_in_eval": K}, K: that forward left the values as the
step made them (nothing put back). Both steps must not be rounds. Exits 1 when attach or a step failed.

usage: attach_evaluate.py SOCKET --steps N --at S [S ...] [--then]
(PYTHONPATH must hold src/python and contrib/examples.)
"""
import argparse
import json

import torch
import torch.nn.functional as F

import gossipd
import torch_cnn


def values(model):
    return torch.cat([p.detach().flatten() for p in model.parameters()]).clone()


def opt_step(model, opt, x, y):
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()


def sgd_step(model, opt, x, y, peer):
    opt_step(model, opt, x, y)
    return peer.step()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("--steps", type=int, required=True)
    ap.add_argument("--at", type=int, nargs="+", required=True)
    ap.add_argument("--then", action="store_true")
    args = ap.parse_args()

    torch.manual_seed(1)
    model = torch_cnn.CNN()
    x, y = torch_cnn.load(torch_cnn.DATA, "train")
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with gossipd.attach(model, socket=args.socket, name="attach_evaluate") as peer:
        for step in range(1, args.steps + 1):
            lo = (step * 64) % 50000
            if not sgd_step(model, opt, x[lo:lo + 64], y[lo:lo + 64], peer):
                return 1
            if step not in args.at:
                continue
            own, mixes = values(model), peer.mixes
            model.eval()
            with torch.no_grad():
                model(x[:8])
                seen = values(model)
                model(x[:8])
                twice = torch.equal(seen, values(model))
            model.train()
            with torch.no_grad():
                model(x[:8])
            print(json.dumps({"step": step, "job": not torch.equal(seen, own), "twice": twice,
                              "restored": torch.equal(values(model), own),
                              "mixed": peer.mixes - mixes}), flush=True)
        if args.then:
            lo = (args.steps + 1) * 64
            opt_step(model, opt, x[lo:lo + 64], y[lo:lo + 64])
            own = values(model)
            model.eval()
            with torch.no_grad():
                model(x[:8])
            model.train()
            if not peer.step():
                return 1
            print(json.dumps({"own_at_step": torch.equal(values(model), own)}), flush=True)
            model.eval()
            lo += 64
            if not sgd_step(model, opt, x[lo:lo + 64], y[lo:lo + 64], peer):
                return 1
            after = values(model)
            model.train()
            with torch.no_grad():
                model(x[:8])
            print(json.dumps({"trained_in_eval": torch.equal(values(model), after)}),
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
