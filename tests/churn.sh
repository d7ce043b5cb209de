#!/bin/bash
# Churn with real daemons: a 4-peer job gains 2 joiners (each through one
# member, pulling the model from donors) and loses one peer to SIGKILL in
# the middle of training. Every surviving peer still reaches the target
# (>= 0.80 on the whole test set, exit 0), and each joiner's first
# evaluation after its pull is no more than 2 points below its donors' (their
# evaluations around the step the joiner took over).
. "$(dirname "$0")/fleet.sh"
fleet_need_data
fleet_keygen "$FLEET_DIR/key"
common="--key-file $FLEET_DIR/key --epochs 30 --eval-every 300 --seed 11"
declare -A addr

job() {
	local i peers=
	for i in 0 1 2 3; do
		fleet_port port
		addr[p$i]=127.0.0.1:$port
		peers="$peers${peers:+,}${addr[p$i]}"
	done
	for i in 0 1 2 3; do
		# shellcheck disable=SC2086 # common is a list of words
		fleet_gossipd "p$i" --listen "${addr[p$i]}" --peers "$peers" --shard "$i/6" $common
	done
	for i in 0 1 2 3; do fleet_wait_up "p$i" || return; done
}
fleet_up job

# joiner NAME SHARD MEMBER: NAME joins through MEMBER.
joiner() {
	fleet_port port
	addr[$1]=127.0.0.1:$port
	# shellcheck disable=SC2086
	fleet_gossipd "$1" --listen "${addr[$1]}" --join "${addr[$3]}" --shard "$2/6" $common
	fleet_wait_up "$1"
}

# step_of NAME: the peer's step (0 if it does not answer).
step_of() {
	fleet_status "$1" .step || echo 0
}
n=0
# Join late in the cosine schedule, where a model's accuracy no longer
# swings by points between evaluations, so the comparison means something.
until [ "$(step_of p0)" -ge 2700 ]; do
	n=$((n + 1)); [ $n -gt 1200 ] && fleet_fail "job did not get going"; sleep 0.1
done
# The job is paused while the joiners load their data and open their
# endpoints: on a machine with cores to spare the job would otherwise
# finish its budget before they are up. All four pause together, so none
# of them has anything to suspect the others of.
fleet_kill STOP p0 p1 p2 p3
# Up means "joining through": the joiners wait for the job to go on.
fleet_up joiner j4 4 p0
fleet_up joiner j5 5 p2
fleet_kill CONT p0 p1 p2 p3
for j in j4 j5; do fleet_wait_log $j "bootstrap: model pulled" "pull the model"; done
fleet_alive "$(fleet_pid p3)" || fleet_fail "p3 ended before the joiners were in"
[ "$(fleet_status p3 .state)" = training ] ||
	fleet_fail "p3 is no longer training when it is to be killed"
fleet_kill KILL p3
fleet_ok "2 joiners pulled the model; p3 SIGKILLed at step $(step_of p0) of p0"

for p in p0 p1 p2 j4 j5; do
	fleet_wait_exit "$p" 240 || fleet_fail "$p exited non-zero: $(fleet_tail "$p")"
done

named=()
for p in "${!addr[@]}"; do named+=("$p=${addr[$p]}"); done
$PYTHON - "$FLEET_DIR" "${named[@]}" <<'PY' || fleet_fail "churn checks"
import re, sys
T = sys.argv[1]
name = {a: n for n, a in (w.split("=") for w in sys.argv[2:])}
def evals(p):
    out = []
    for line in open(f"{T}/{p}.log"):
        m = re.search(r"step (\d+) epoch \d+: test loss [\d.]+ accuracy ([\d.]+)", line)
        if m:
            out.append((int(m.group(1)), float(m.group(2))))
    return out
bad = 0
for p in ("p0", "p1", "p2", "j4", "j5"):
    m = re.search(r"done: \d+ steps .* test accuracy ([\d.]+)", open(f"{T}/{p}.log").read())
    acc = float(m.group(1)) if m else -1
    print(f"{p}: final accuracy {acc}")
    if acc < 0.80:
        print(f"FAIL: {p} final accuracy {acc} < 0.80"); bad += 1
for j in ("j4", "j5"):
    text = open(f"{T}/{j}.log").read()
    m = re.search(r"model pulled from ([\d.:,]+); continuing from the donors' step (\d+)", text)
    step = int(m.group(2))
    first = [a for s, a in evals(j) if s == step][0]
    # A model in training swings by a point or two between evaluations,
    # so the reference is each donor's evaluations just before and just
    # after the step the joiner took over.
    ref = []
    for d in m.group(1).split(","):
        ev = evals(name[d])
        ref += [a for s, a in ev if s <= step][-1:] + [a for s, a in ev if s > step][:1]
    mean = sum(ref) / len(ref)
    print(f"{j}: first evaluation {first:.4f} at step {step}; donors {m.group(1)} had {mean:.4f}")
    # One-sided: the average of several donors often scores above each of
    # them (seen: 2.0 points above, on a loaded machine); only a joiner
    # that starts worse has lost what the job had learned.
    if first < mean - 0.02:
        print(f"FAIL: {j} is {mean - first:.4f} below its donors"); bad += 1
sys.exit(1 if bad else 0)
PY
fleet_ok "survivors reach the target; joiners start no more than 2 points below their donors"
