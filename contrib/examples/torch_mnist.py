#!/usr/bin/python3
"""The PyTorch examples' MNIST loop (pytorch/examples, mnist/main.py), on
Fashion-MNIST, as a user writes it, attached to a gossipd peer with the
README's three lines when --socket is given:

    gossipd --trainer external --listen ... --peers ... &
    PYTHONPATH=src/python contrib/examples/torch_mnist.py --shard 0/4 --socket PEER.sock

Nothing in it is tuned for gossip: the examples' network (two 3x3
convolutions, max-pool, dropout, two linear layers, log-softmax), nll_loss,
Adadelta at lr 1.0, StepLR with gamma 0.7 each epoch, batch 64 shuffled by a
DataLoader each epoch. Without --seed it seeds nothing, as most scripts: each
process starts from its own random model. --shard I/N trains on the I-th of
N contiguous parts of the 60k training images (the file is in no class
order). contrib/bench/ddp_mnist.py runs the same loop under PyTorch DDP, and
contrib/bench/plain.sh compares the three: alone, DDP and attached.

With --json it prints, one JSON object a line, {"ev":"epoch",...} at each
epoch's end (the whole 10k test set's accuracy and mean loss) and a last
{"ev":"done",...}.
"""
import argparse
import gzip
import json
import os
import struct
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, TensorDataset

import gossipd

DATA = "/usr/share/datasets/fashion-mnist"


def read_idx(path):
    """A gzip'ed IDX file of unsigned bytes as a uint8 tensor of its shape."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    magic, = struct.unpack(">I", raw[:4])
    ndim = magic & 0xff
    shape = struct.unpack(">%dI" % ndim, raw[4:4 + 4 * ndim])
    return torch.frombuffer(bytearray(raw[4 + 4 * ndim:]), dtype=torch.uint8).view(shape)


def dataset(data, kind, shard=(0, 1)):
    """KIND ("train" or "t10k") as a TensorDataset of normalised 1x28x28
    images and labels; SHARD (i, n): only the i-th of n contiguous parts."""
    x = read_idx(os.path.join(data, "%s-images-idx3-ubyte.gz" % kind))
    y = read_idx(os.path.join(data, "%s-labels-idx1-ubyte.gz" % kind))
    i, n = shard
    lo, hi = len(x) * i // n, len(x) * (i + 1) // n
    x = (x[lo:hi].float() / 255 - 0.2860) / 0.3530     # Fashion-MNIST's mean, std
    return TensorDataset(x.unsqueeze(1), y[lo:hi].long())


class Net(nn.Module):
    def __init__(self):
        super(Net, self).__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = F.relu(x)
        x = self.conv2(x)
        x = F.relu(x)
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = self.fc1(x)
        x = F.relu(x)
        x = self.dropout2(x)
        x = self.fc2(x)
        output = F.log_softmax(x, dim=1)
        return output


def train(model, train_loader, optimizer, peer=None):
    """One epoch; returns (steps, going): going is False once the peer leaves."""
    model.train()
    steps = 0
    for data, target in train_loader:
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        steps += 1
        if peer is not None and not peer.step():
            return steps, False
    return steps, True


def test(model, test_loader):
    """(accuracy, mean loss) on the test set."""
    model.eval()
    test_loss = 0
    correct = 0
    with torch.no_grad():
        for data, target in test_loader:
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            pred = output.argmax(dim=1, keepdim=True)
            correct += pred.eq(target.view_as(pred)).sum().item()
    n = len(test_loader.dataset)
    return correct / n, test_loss / n


def shard(arg):
    i, _, n = arg.partition("/")
    i, n = int(i), int(n)
    if not 0 <= i < n:
        raise argparse.ArgumentTypeError("shard %s: want I/N with 0 <= I < N" % arg)
    return i, n


def arguments(description=__doc__.split("\n\n")[0]):
    """The options the loop and contrib/bench/ddp_mnist.py share."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--test-batch-size", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=14)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=None,
                        help="torch.manual_seed (default: none, a random start)")
    parser.add_argument("--data", default=DATA)
    parser.add_argument("--json", action="store_true",
                        help="one JSON line per epoch and a last one, instead of text")
    return parser


def report(args, ev, **kw):
    if args.json:
        print(json.dumps(dict(ev=ev, **kw)), flush=True)
    elif ev == "epoch":
        print("epoch %d (step %d): test accuracy %.4f, loss %.4f" %
              (kw["epoch"], kw["step"], kw["accuracy"], kw["loss"]), flush=True)


def main():
    parser = arguments()
    parser.add_argument("--shard", type=shard, default=(0, 1), metavar="I/N",
                        help="train on the I-th of N contiguous parts of the training set")
    parser.add_argument("--socket", help="attach to the gossipd peer of this control socket")
    args = parser.parse_args()

    torch.set_num_threads(1)
    if args.seed is not None:
        torch.manual_seed(args.seed)
    train_loader = DataLoader(dataset(args.data, "train", args.shard),
                              batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(dataset(args.data, "t10k"), batch_size=args.test_batch_size)

    model = Net()
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    peer = None
    if args.socket:
        peer = gossipd.attach(model, socket=args.socket)

    t0 = time.time()
    step = 0
    for epoch in range(1, args.epochs + 1):
        steps, going = train(model, train_loader, optimizer, peer)
        step += steps
        accuracy, loss = test(model, test_loader)
        report(args, "epoch", epoch=epoch, step=step, accuracy=accuracy, loss=loss)
        if not going:
            break
        scheduler.step()
    if peer is not None:
        peer.close()
    report(args, "done", epoch=epoch, step=step, accuracy=accuracy, loss=loss,
           seconds=time.time() - t0)


if __name__ == "__main__":
    main()
