#!/usr/bin/python3
"""The attach tests' probe: attaches a fresh contrib/examples/torch_cnn.py
CNN (initialised unlike the job's, or from --seed) to a peer, looks at what
it got, and detaches without training. Prints one JSON line:
{"fresh":..., "step":..., "accuracy":..., "digest":..., "same":..., "mean_err":...,
"mean_err_int8":...}
("digest": BLAKE2b-256 of the attached values, as the attach request's;
"same": whether the values equal those saved by --save earlier, with
--same; "mean_err": their largest distance from the mean of two saved
ones, with --mean, and "mean_err_int8" that distance in units of the
int8 rounding of a pull, at most 1 for a pulled average), or with
--refused, {"refused": "<the daemon's reason>"}. Exits 1 when attach did
not do what was expected.

usage: attach_probe.py SOCKET [--seed N] [--save FILE] [--same FILE] [--mean FILE FILE] [--refused]
(PYTHONPATH must hold src/python and contrib/examples.)
"""
import argparse
import json
import sys

import torch

import gossipd
import torch_cnn


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("socket")
    ap.add_argument("--save", help="save the attached values to FILE")
    ap.add_argument("--same", help="compare the attached values with FILE's")
    ap.add_argument("--mean", nargs=2, metavar="FILE",
                    help="how far the attached values are from the mean of two saved ones")
    ap.add_argument("--refused", action="store_true", help="expect attach to be refused")
    ap.add_argument("--seed", type=int, default=987654, help="the model's initialisation")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    model = torch_cnn.CNN()
    try:
        peer = gossipd.attach(model, socket=args.socket, name="attach_probe")
    except gossipd.AttachError as e:
        print(json.dumps({"refused": str(e), "errno": e.errno}))
        return 0 if args.refused and e.errno is None else 1
    with peer:
        if args.refused:
            print(json.dumps({"refused": None}))
            return 1
        values = torch.cat([p.detach().flatten() for p in model.parameters()])
        tx, ty = torch_cnn.load(torch_cnn.DATA, "t10k")
        acc, _ = torch_cnn.evaluate(model, tx[:2000], ty[:2000])
        out = {"fresh": peer.fresh, "step": peer.step_count, "accuracy": acc,
               "digest": gossipd._digest(list(model.named_parameters()))}
    # Closed: the model has copies of its own now, still the same values.
    if not torch.equal(values, torch.cat([p.detach().flatten() for p in model.parameters()])):
        print("the values changed when the peer closed", file=sys.stderr)
        return 1
    if args.save:
        torch.save(values, args.save)
    if args.same:
        out["same"] = torch.equal(values, torch.load(args.same))
    if args.mean:
        a, b = torch.load(args.mean[0]), torch.load(args.mean[1])
        mean = (a + b) / 2
        out["mean_err"] = (values - mean).abs().max().item()
        # Donors send int8 (--values' default): each value within 1/254 of
        # the largest magnitude of its 64-value block, which lies within 63
        # places of it whatever the blocks' alignment here.
        def near_max(x):
            return torch.nn.functional.max_pool1d(x.abs().view(1, 1, -1), 127, stride=1,
                                                  padding=63).view(-1)
        bound = (near_max(a) + near_max(b)) / 2 / 254 + 1e-6
        out["mean_err_int8"] = ((values - mean).abs() / bound).max().item()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
