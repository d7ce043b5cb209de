#!/bin/bash
# The Python module names the kind of the optimizer that steps the model
# (gossipd-attach(7), step's "optimizer"), and mode share weighs shares by
# it (gossipd(8), SHARE): a process stepping by Adam on a peer with
# --optimizer auto is taken as adaptive; the next process on it, stepping
# by SGD made after attach (found at its first step), as sgd; on a peer
# with --optimizer sgd an Adam process is warned about, and sgd stands.
# The C library names it through gd_client_set_optimizer (first, without
# torch): "adaptive" reaches the peer, "adam" is refused naming it.
# What the process names to go whole in every share (step's "whole"):
# the C library's ranges (gd_client_set_whole) reach the peer, ranges out
# of order are refused naming them; the Python module names the model's
# tensors of at most one dimension (its two biases).
. "$(dirname "$0")/fleet.sh"
CLIENT=$FLEET_BUILD/tests/attach_client
[ -x "$CLIENT" ] || fleet_skip "tests/attach_client not built (make check builds it)"
fleet_keygen "$FLEET_DIR/key"

fleet_job c --trainer external --mode share
out=$(timeout 60 "$CLIENT" --socket "$FLEET_DIR/c.sock" --steps 3 --optimizer adam 2>&1) &&
	fleet_fail "the C library took optimizer adam: $out"
grep -q '"event":"error","where":"optimizer".*adam' <<<"$out" ||
	fleet_fail "optimizer adam refused without naming it: $out"
out=$(timeout 60 "$CLIENT" --socket "$FLEET_DIR/c.sock" --steps 3 --optimizer adaptive 2>&1) ||
	fleet_fail "the C process naming adaptive failed: $out"
fleet_wait_log c "steps by an optimizer it calls adaptive: shares go in at 1/sqrt\(n\)" \
	"take the C process's adaptive" 10
fleet_ok "the C library names adaptive to its peer and refuses adam"
out=$(timeout 60 "$CLIENT" --socket "$FLEET_DIR/c.sock" --steps 3 --whole 10:2 --whole 0:4 2>&1) &&
	fleet_fail "the C library took ranges out of order: $out"
grep -q '"event":"error","where":"whole"' <<<"$out" ||
	fleet_fail "ranges out of order refused without naming whole: $out"
out=$(timeout 60 "$CLIENT" --socket "$FLEET_DIR/c.sock" --steps 3 --whole 0:4 --whole 10:2 2>&1) ||
	fleet_fail "the C process naming whole ranges failed: $out"
fleet_wait_log c "share: 6 of the 256 values \(2 ranges\) go whole in every share" \
	"take the C process's whole ranges" 10
fleet_ok "the C library names ranges to go whole and refuses them out of order"

"$PYTHON" -c 'import torch' 2>/dev/null || fleet_skip "$PYTHON cannot import torch (apt-get install python3-torch)"
export PYTHONPATH=$FLEET_TOP/src/python${PYTHONPATH:+:$PYTHONPATH}

# loop SOCKET OPTIMIZER before|after: 3 steps of a small model, the
# optimizer made before or after attach.
loop() {
	"$PYTHON" - "$@" <<'PY'
import sys
import torch
import gossipd

sock, name, when = sys.argv[1:]
torch.manual_seed(1)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
make = lambda: getattr(torch.optim, name)(model.parameters(), lr=0.01)
opt = make() if when == "before" else None
peer = gossipd.attach(model, socket=sock)
opt = opt or make()
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(4, 8)).square().mean().backward()
    opt.step()
    peer.step()
peer.close()
PY
}

# Two jobs of one peer each: shares need a network, not partners.
fleet_job a --trainer external --mode share
fleet_job b --trainer external --mode share --optimizer sgd

loop "$FLEET_DIR/a.sock" Adam before || fleet_fail "the Adam process on a failed"
fleet_wait_log a "steps by an optimizer it calls adaptive: shares go in at 1/sqrt\(n\)" \
	"take Adam as adaptive" 10
fleet_ok "a process stepping by Adam: its peer weighs shares at 1/sqrt(n)"
# Linear(8, 16) and Linear(16, 2): the biases at 128 (16) and 176 (2)
fleet_wait_log a "share: 18 of the 178 values \(2 ranges\) go whole in every share" \
	"take the Python process's biases whole" 10
fleet_ok "the Python module names the model's vectors to go whole"

loop "$FLEET_DIR/a.sock" SGD after || fleet_fail "the SGD process on a failed"
fleet_wait_log a "steps by an optimizer it calls sgd: shares go in at 1/n" \
	"take SGD made after attach as sgd" 10
fleet_ok "the next process, SGD made after attach: 1/n again"

loop "$FLEET_DIR/b.sock" Adam before || fleet_fail "the Adam process on b failed"
fleet_wait_log b "calls adaptive; optimizer sgd stands" "warn that --optimizer sgd stands" 10
fleet_ok "with --optimizer sgd an Adam process is warned about, sgd stands"
