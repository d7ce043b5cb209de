#!/usr/bin/python3
"""contrib/examples/torch_mnist.py's loop under PyTorch DDP, the DDP side of
contrib/bench/plain.sh: --world (4) ranks spawned with torch.multiprocessing
on 127.0.0.1 (gloo), rank r training on the contiguous quarter r/world of
the training set with its own DataLoader (shuffled each epoch), its own seed
(--seed + r when --seed is given, else none) and the same Net, Adadelta,
StepLR, batch and epoch loop, imported from torch_mnist.py. The model is
wrapped in DistributedDataParallel, which broadcasts rank 0's parameters at
the start and averages the gradients of the ranks at every step, as DDP
users get. Rank 0 evaluates on the whole test set at each epoch's end (the
ranks hold the same model) and prints torch_mnist.py's lines (--json: its
JSON lines).
"""
import os
import sys
import time

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.join(here, "..", "..")
sys.path[:0] = [os.path.join(top, "contrib", "examples"), os.path.join(top, "src", "python")]

import torch                                            # noqa: E402
import torch.distributed as dist                        # noqa: E402
import torch.multiprocessing as mp                      # noqa: E402
import torch.optim as optim                             # noqa: E402
from torch.nn.parallel import DistributedDataParallel   # noqa: E402
from torch.optim.lr_scheduler import StepLR             # noqa: E402
from torch.utils.data import DataLoader                 # noqa: E402

from torch_mnist import Net, arguments, dataset, report, test, train  # noqa: E402


def worker(rank, args):
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % args.port,
                            rank=rank, world_size=args.world)
    if args.seed is not None:
        torch.manual_seed(args.seed + rank)
    train_loader = DataLoader(dataset(args.data, "train", (rank, args.world)),
                              batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(dataset(args.data, "t10k"), batch_size=args.test_batch_size)

    model = DistributedDataParallel(Net())
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)

    t0 = time.time()
    step = 0
    for epoch in range(1, args.epochs + 1):
        steps, _ = train(model, train_loader, optimizer)
        step += steps
        if rank == 0:
            accuracy, loss = test(model.module, test_loader)
            report(args, "epoch", epoch=epoch, step=step, accuracy=accuracy, loss=loss)
        scheduler.step()
    if rank == 0:
        report(args, "done", epoch=epoch, step=step, accuracy=accuracy, loss=loss,
               seconds=time.time() - t0)
    dist.barrier()
    dist.destroy_process_group()


def main():
    parser = arguments(__doc__.split("\n\n")[0])
    parser.add_argument("--world", type=int, default=4)
    parser.add_argument("--port", type=int, default=29500)
    args = parser.parse_args()
    mp.spawn(worker, args=(args,), nprocs=args.world)


if __name__ == "__main__":
    main()
