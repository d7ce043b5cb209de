#!/usr/bin/python3
"""Experiment of issue 31: contrib/examples/torch_cnn.py's loop (its CNN, data,
shards, batch order and schedule, imported), attached, with an outer
Nesterov step applied by the process itself every --outer-h steps to what
its own steps and the peer's mixes changed since the last one (DiLoCo's
outer optimizer over gossip, as NoLoCo has it): m = mu m + (anchor - x);
x = anchor - lr (anchor - x + mu m); anchor = x. --outer-lr 1 and
--outer-mom 0 leave the loop as it is. --own-seed: each process's own
initial model. Prints one JSON line per evaluation and a last "done" line
(the whole test set)."""
import argparse, json, os, sys, time
here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(here, "..", "..", "examples"), os.path.join(here, "..", "..", "..", "src", "python")]
import torch, torch.nn.functional as F
import torch_cnn as tc
import gossipd

ap = argparse.ArgumentParser()
ap.add_argument("--socket")
ap.add_argument("--shard", type=tc.shard, default=(0, 1))
tc.add_training_args(ap)
ap.add_argument("--outer-lr", type=float, default=1.0)
ap.add_argument("--outer-mom", type=float, default=0.0)
ap.add_argument("--outer-h", type=int, default=4)
ap.add_argument("--total-epochs", type=float, default=12)
ap.add_argument("--own-seed", type=int, default=None)
a = ap.parse_args()
torch.set_num_threads(1)
x, y = tc.load(a.data, "train"); tx, ty = tc.load(a.data, "t10k")
tx, ty = tx[:a.eval_samples], ty[:a.eval_samples]
i, n = a.shard
lo, hi = tc.shard_range(len(x), i, n); x, y = x[lo:hi], y[lo:hi]
per_epoch = len(x) // a.batch
total = int(per_epoch * a.total_epochs); stop = int(per_epoch * a.epochs)
torch.manual_seed(a.own_seed if a.own_seed is not None else a.seed)
model = tc.CNN(*a.channels)
opt = tc.make_optimizer(a, model.parameters())
peer = gossipd.attach(model, socket=a.socket) if a.socket else None
step = peer.step_count if peer else 0
params = [p for p in model.parameters()]
anchor = [p.detach().clone() for p in params]
mom = [torch.zeros_like(p) for p in params]
def outer():
    with torch.no_grad():
        for p, an, m in zip(params, anchor, mom):
            d = an - p
            m.mul_(a.outer_mom).add_(d)
            p.copy_(an - a.outer_lr * (d + a.outer_mom * m))
            an.copy_(p)
t0 = time.time()
while step < stop:
    ep = step // per_epoch
    order = tc.batch_order(per_epoch * a.batch, a.seed, i, ep)
    for b in range(step % per_epoch, per_epoch):
        if step >= stop: break
        idx = order[b * a.batch:(b + 1) * a.batch]
        for g in opt.param_groups: g["lr"] = tc.lr_at(a, step, total, per_epoch)
        opt.zero_grad(); F.cross_entropy(model(x[idx]), y[idx]).backward(); opt.step()
        step += 1
        if peer is not None and not peer.step(): step = stop; break
        if (a.outer_lr != 1.0 or a.outer_mom != 0.0) and step % a.outer_h == 0:
            outer()
        if step % a.eval_every == 0:
            acc, loss = tc.evaluate(model, tx, ty)
            print(json.dumps(dict(ev="eval", step=step, acc=acc, loss=loss,
                  bytes=peer.status().get("bytes_sent", 0) if peer else 0, t=time.time()-t0)), flush=True)
acc, loss = tc.evaluate(model, *tc.load(a.data, "t10k"))
print(json.dumps(dict(ev="done", step=step, acc=acc, loss=loss)), flush=True)
if peer: peer.close()
