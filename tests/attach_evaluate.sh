#!/bin/bash
# Evaluation of the job's model (gossipd-attach(7), evaluate and train): a
# PyTorch process attached through the Python module, whose loop calls
# model.eval() and model.train() as loops do. In mode share its eval-mode
# forwards see the job's model (not its own values after its own steps
# since its last round) and the same values each time, and its first
# training-mode forward gets its own values back bit for bit; a process
# that evaluates between its optimizer step and peer.step() (model.train()
# before it) has its own values back after the step; one that trains on in
# eval mode keeps what it trained. In mode delta, which
# has no job's model, eval mode sees the own values. One peer alone, so
# that no partner's mix can land in between and every check is exact. The
# protocol's errors: evaluate before attach, train without an evaluate.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
"$PYTHON" -c 'import torch' 2>/dev/null || fleet_skip "$PYTHON cannot import torch (apt-get install python3-torch)"
export PYTHONPATH=$FLEET_TOP/src/python:$FLEET_TOP/contrib/examples${PYTHONPATH:+:$PYTHONPATH}
PROBE=("$PYTHON" "$FLEET_TOP/tests/attach_evaluate.py")

fleet_keygen "$FLEET_DIR/key"

# mode NAME GOSSIPD_ARGS...: one peer NAME with --trainer external.
mode() {
	local name=$1
	shift
	fleet_job "$name" --trainer external --interval 4 "$@"
	fleet_wait_status "$name" .attach.state waiting "wait for a process"
}

mode s --mode share
# The job's model is its start until the first round, at step 4; rounds at
# 4, 8 and 12, so 2, 6 and 10 are two steps past one.
out=$("${PROBE[@]}" "$FLEET_DIR/s.sock" --steps 12 --at 2 6 10 --then 2>&1) ||
	fleet_fail "the process failed: $out"
for s in 2 6 10; do
	line=$(grep "\"step\": $s," <<<"$out") || fleet_fail "no evaluation at step $s: $out"
	[ "$(fleet_json '"\(.job) \(.twice) \(.restored) \(.mixed)"' <<<"$line")" = "true true true 0" ] ||
		fleet_fail "share, step $s: eval mode did not see the job's model, or training mode not the own again: $line"
done
[ "$(fleet_json .own_at_step <<<"$(grep own_at_step <<<"$out")")" = true ] ||
	fleet_fail "share: model.train() then peer.step() did not give the own model back: $out"
[ "$(fleet_json .trained_in_eval <<<"$(grep trained_in_eval <<<"$out")")" = true ] ||
	fleet_fail "share: a step taken in eval mode was undone: $out"
fleet_ok "share: eval mode sees the job's model, training mode the own again, bit for bit"

# The protocol's errors, on a connection of its own: nothing attached.
reply=$("$PYTHON" -c 'import sys, gossipd
try:
    print(gossipd._Connection(sys.argv[1], 10).request("evaluate"))
except gossipd.AttachError as e:
    print(e)' "$FLEET_DIR/s.sock" 2>&1)
grep -q "evaluate: not attached" <<<"$reply" || fleet_fail "evaluate unattached: $reply"
fleet_ok "evaluate without an attach is refused: $reply"
fleet_ctl s leave >/dev/null || fleet_fail "s: leave"
fleet_wait_exit s 30 || fleet_fail "s: leave exited $?: $(fleet_tail s)"

mode d --mode delta
out=$("${PROBE[@]}" "$FLEET_DIR/d.sock" --steps 10 --at 6 10 2>&1) ||
	fleet_fail "the process failed: $out"
for s in 6 10; do
	line=$(grep "\"step\": $s," <<<"$out") || fleet_fail "no evaluation at step $s: $out"
	[ "$(fleet_json '"\(.job) \(.restored)"' <<<"$line")" = "false true" ] ||
		fleet_fail "delta, step $s: eval mode did not see the own values: $line"
done
fleet_ok "delta (no job's model): eval mode sees the process's own values"
