#!/usr/bin/python3
"""PyTorch baseline for bench_trainer: the same MLP, batch, float32, thread
count and SGD (momentum, weight decay) step, on random data in memory.
Measured in rounds, best round kept, like bench_trainer.

usage: trainer_torch.py [-m SPEC] [-b BATCH] [-t THREADS] [-r ROUNDS] [-s SECONDS]
prints one line: batch=.. threads=.. torch_sps=..
"""
import argparse
import time

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-m", default="784-256-128-10")
    ap.add_argument("-b", type=int, default=64)
    ap.add_argument("-t", type=int, default=1)
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("-s", type=float, default=0.4)
    ap.add_argument("--foreach", action="store_true",
                    help="use the multi-tensor SGD kernels")
    a = ap.parse_args()

    torch.set_num_threads(a.t)
    torch.manual_seed(1)
    sizes = [int(s) for s in a.m.removeprefix("mlp:").split("-")]
    layers = []
    for i in range(len(sizes) - 1):
        layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
        if i + 2 < len(sizes):
            layers.append(torch.nn.ReLU())
    model = torch.nn.Sequential(*layers)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9,
                          weight_decay=5e-4, foreach=a.foreach)
    xs = [torch.rand(a.b, sizes[0]) - 0.5 for _ in range(8)]
    ys = [torch.randint(0, sizes[-1], (a.b,)) for _ in range(8)]
    lossf = torch.nn.CrossEntropyLoss()

    def step(i):
        opt.zero_grad(set_to_none=True)
        loss = lossf(model(xs[i % 8]), ys[i % 8])
        loss.backward()
        opt.step()
        return loss

    for i in range(20):
        step(i)
    best = 0.0
    for _ in range(a.r):
        steps = 0
        t0 = time.perf_counter()
        while True:
            for _ in range(10):
                step(steps)
                steps += 1
            t = time.perf_counter() - t0
            if t >= a.s:
                break
        best = max(best, steps * a.b / t)
    print(f"batch={a.b} threads={a.t} torch_sps={best:.1f}")


if __name__ == "__main__":
    main()
