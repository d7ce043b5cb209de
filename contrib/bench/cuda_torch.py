#!/usr/bin/env python3
"""cuda_torch: the PyTorch baseline for contrib/bench/cuda.sh, and the table.

  cuda_torch.py [--seconds S] [--csv FILE]          time PyTorch
  cuda_torch.py --table OURS.csv TORCH.csv [--summary FILE]

The PyTorch run does what bench_cuda does: the same MLPs (784-256-128-10,
784-4096-4096-10), batches 256 and 1024, float32 with TF32 off, SGD with
momentum 0.9 and weight decay 5e-4, batches sliced from a synthetic data
set of 16384 samples in (pinned) host memory and copied to the GPU every
step. "torch" reads the loss back every step, as our backend does;
"torch_nosync" reads it only at the end, PyTorch's best case. Without
torch or without a GPU it says so and writes no rows.
"""
import argparse
import csv
import sys
import time

MODELS = ["784-256-128-10", "784-4096-4096-10"]
BATCHES = [256, 1024]
SAMPLES = 16384


def torch_rows(seconds, device):
    try:
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        print(f"torch: not installed ({e}); PyTorch columns will be NA")
        return []
    dev = torch.device(device)
    cuda = dev.type == "cuda"
    if cuda and not torch.cuda.is_available():
        print("torch: no CUDA device visible to PyTorch; PyTorch columns will be NA")
        return []
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    where = torch.cuda.get_device_name(dev) if cuda else device
    print(f"torch {torch.__version__} on {where}")
    gen = torch.Generator().manual_seed(1)
    data = torch.rand(SAMPLES, 784, generator=gen)
    labels = torch.randint(0, 10, (SAMPLES,), generator=gen)
    if cuda:
        data, labels = data.pin_memory(), labels.pin_memory()
    synchronize = torch.cuda.synchronize if cuda else (lambda: None)
    rows = []
    for model in MODELS:
        sizes = [int(s) for s in model.split("-")]
        for batch in BATCHES:
            for variant in ("torch", "torch_nosync"):
                layers = []
                for i in range(len(sizes) - 1):
                    layers.append(torch.nn.Linear(sizes[i], sizes[i + 1]))
                    if i < len(sizes) - 2:
                        layers.append(torch.nn.ReLU())
                net = torch.nn.Sequential(*layers).to(dev)
                opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9,
                                      weight_decay=5e-4)
                nb = SAMPLES // batch
                sync = variant == "torch"

                def step(k):
                    xb = data[k * batch:(k + 1) * batch].to(dev, non_blocking=True)
                    yb = labels[k * batch:(k + 1) * batch].to(dev, non_blocking=True)
                    loss = F.cross_entropy(net(xb), yb)
                    opt.zero_grad(set_to_none=True)
                    loss.backward()
                    opt.step()
                    return loss.item() if sync else loss

                for i in range(20):
                    step(i % nb)
                synchronize()
                steps, i = 0, 0
                t0 = time.perf_counter()
                while True:
                    for _ in range(10):
                        loss = step(i % nb)
                        i += 1
                        steps += 1
                    synchronize()
                    t = time.perf_counter() - t0
                    if t >= seconds:
                        break
                loss = float(loss)
                if loss != loss:
                    print(f"torch: {model} batch {batch}: loss is NaN")
                rows.append(["train", model, batch, f"{variant}_samples_per_s",
                             f"{steps * batch / t:.1f}"])
                rows.append(["train", model, batch, f"{variant}_ms_per_step",
                             f"{1e3 * t / steps:.4f}"])
                print(f"{variant:13s} {model:17s} batch {batch:5d}: "
                      f"{steps * batch / t:12.1f} samples/s")
                del net, opt
        if cuda:
            torch.cuda.empty_cache()
    return rows


def read_rows(path):
    vals = {}
    try:
        with open(path, newline="") as f:
            for r in csv.reader(f):
                if len(r) == 5 and r[0] != "section":
                    vals[(r[0], r[1], r[2], r[3])] = float(r[4])
    except FileNotFoundError:
        pass
    return vals


def fmt(v, spec="{:.0f}"):
    return "NA" if v is None else spec.format(v)


def ratio(a, b):
    return None if a is None or b in (None, 0) else a / b


def table(ours_path, torch_path, summary):
    v = read_rows(ours_path)
    v.update(read_rows(torch_path))
    out = []
    print()
    print("training throughput (samples/s), same GPU, float32")
    print(f"{'model':17s} {'batch':>5s} {'ours':>12s} {'torch':>12s} "
          f"{'torch nosync':>12s} {'ours/torch':>10s} {'ours/nosync':>11s}")
    for model in MODELS:
        for batch in BATCHES:
            k = lambda m: v.get(("train", model, str(batch), m))
            o, t, n = k("ours_samples_per_s"), k("torch_samples_per_s"), \
                k("torch_nosync_samples_per_s")
            print(f"{model:17s} {batch:5d} {fmt(o):>12s} {fmt(t):>12s} "
                  f"{fmt(n):>12s} {fmt(ratio(o, t), '{:.2f}'):>10s} "
                  f"{fmt(ratio(o, n), '{:.2f}'):>11s}")
            out.append(["train", model, batch, o, t, n, ratio(o, t), ratio(o, n)])
    gm = [m for (s, m, _, _) in v if s == "copy"]
    if gm:
        model = gm[0]
        d2d = next((x for (s, m, _, met), x in v.items()
                    if s == "copy" and met == "d2d_GBps"), None)
        d2h = next((x for (s, m, _, met), x in v.items()
                    if s == "copy" and met == "d2h_pinned_GBps"), None)
        h2d = next((x for (s, m, _, met), x in v.items()
                    if s == "copy" and met == "h2d_pinned_GBps"), None)
        print()
        print(f"gossip on {model}: device copy {fmt(d2d, '{:.1f}')} GB/s (D2D, bytes "
              f"copied), pinned D2H {fmt(d2h, '{:.1f}')} GB/s, H2D {fmt(h2d, '{:.1f}')} GB/s")
        print(f"{'mask':7s} {'values':>10s} {'ranges':>9s} {'gather GB/s':>11s} "
              f"{'avg_in GB/s':>11s} {'gather/D2D':>10s} {'gather/D2H':>10s} "
              f"{'avg/H2D':>8s}")
        for mask in ("blocks", "coords", "full"):
            k = lambda m: v.get(("gossip", model, mask, m))
            g, a = k("gather_GBps"), k("average_in_GBps")
            print(f"{mask:7s} {fmt(k('values')):>10s} {fmt(k('ranges')):>9s} "
                  f"{fmt(g, '{:.2f}'):>11s} {fmt(a, '{:.2f}'):>11s} "
                  f"{fmt(ratio(g, d2d), '{:.4f}'):>10s} "
                  f"{fmt(ratio(g, d2h), '{:.2f}'):>10s} "
                  f"{fmt(ratio(a, h2d), '{:.2f}'):>8s}")
            out.append(["gossip", model, mask, g, a, d2d, d2h, h2d])
    if summary:
        with open(summary, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["section", "model", "batch_or_mask", "ours_or_gather",
                        "torch_or_average_in", "torch_nosync_or_d2d",
                        "ratio_or_d2h", "ratio_nosync_or_h2d"])
            for r in out:
                w.writerow(["NA" if x is None else x for x in r])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--csv")
    ap.add_argument("--device", default="cuda",
                    help="torch device (cpu only to try the script)")
    ap.add_argument("--table", nargs=2, metavar=("OURS", "TORCH"))
    ap.add_argument("--summary")
    a = ap.parse_args()
    if a.table:
        table(a.table[0], a.table[1], a.summary)
        return 0
    rows = torch_rows(a.seconds, a.device)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["section", "model", "batch_or_mask", "metric", "value"])
            w.writerows(rows)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
