#!/usr/bin/python3
"""Run contrib/bench/ddp_torch.py unchanged inside a testbed namespace.

ddp_torch.py rendezvouses on tcp://127.0.0.1:PORT, which inside a namespace
of its own reaches only that worker. This wrapper points the rendezvous at
rank 0's testbed address (environment TB_INIT, e.g. tcp://10.77.0.1:26000)
and leaves everything else, arguments and output included, to ddp_torch.py;
GLOO_SOCKET_IFNAME (set by testbed.sh) makes gloo's pair sockets use the
shaped link too.
"""
import os
import runpy
import sys

import torch.distributed as dist

_init = dist.init_process_group


def _init_here(*args, **kw):
    if os.environ.get("TB_INIT"):
        kw["init_method"] = os.environ["TB_INIT"]
    return _init(*args, **kw)


dist.init_process_group = _init_here
here = os.path.dirname(os.path.abspath(__file__))
target = os.path.join(here, "..", "bench", "ddp_torch.py")
sys.argv[0] = target
runpy.run_path(target, run_name="__main__")
