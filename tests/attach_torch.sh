#!/bin/bash
# PyTorch through the Python module gossipd (gossipd-attach(7)): 2 peers
# with --trainer external, each with contrib/examples/torch_cnn.py attached
# on its half of Fashion-MNIST. Status shows each process attached, the
# peers exchange, both reach a low accuracy bar; once the processes have
# closed, the daemons stay up and show them detached, and a process that
# attaches again gets the job's model (fresh false, its step, its accuracy),
# the same values each time; a joiner's process gets the donors' average
# that its daemon pulled. One start (--start agree): processes seeded
# alike keep their own values and the second pulls nothing (the attach
# digest) while the first is within its first 100 steps; seeded apart,
# the second gets the first's values.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
"$PYTHON" -c 'import torch' 2>/dev/null || fleet_skip "$PYTHON cannot import torch (apt-get install python3-torch)"
export PYTHONPATH=$FLEET_TOP/src/python:$FLEET_TOP/contrib/examples${PYTHONPATH:+:$PYTHONPATH}
CNN=("$PYTHON" "$FLEET_TOP/contrib/examples/torch_cnn.py" --eval-samples 2000 --threads 1)
PROBE=("$PYTHON" "$FLEET_TOP/tests/attach_probe.py")
STEPS=300
BAR=0.70
declare -A ACC=()

# at_least X MIN: whether the number X is >= MIN.
at_least() { "$PYTHON" -c "import sys; sys.exit(0 if float('$1') >= $2 else 1)"; }

fleet_keygen "$FLEET_DIR/key"
fleet_job "a b" --trainer external
for p in a b; do fleet_wait_status "$p" .attach.state waiting "wait for a process"; done

# Both trainers start from one model, the first's (start agree); the status
# check sees each attached while it trains, which takes seconds.
fleet_start ta "${CNN[@]}" --socket "$FLEET_DIR/a.sock" --shard 0/2 --limit-steps $STEPS \
	--eval-every 100 --name ta
fleet_start tb "${CNN[@]}" --socket "$FLEET_DIR/b.sock" --shard 1/2 --limit-steps $STEPS \
	--eval-every 100 --name tb
for p in a b; do
	fleet_wait_status "$p" '.attach | "\(.state) \(.pid) \(.name)"' \
		"attached $(fleet_pid "t$p") t$p" "show t$p attached" 60
done
fleet_ok "both processes attached (status names their pid and name)"

for p in a b; do
	fleet_wait_exit "t$p" 120 || fleet_fail "t$p exited $?: $(fleet_tail "t$p")"
	acc=$(sed -n 's/^final accuracy //p' "$FLEET_LOGS/t$p.log")
	[ -n "$acc" ] || fleet_fail "t$p printed no final accuracy: $(fleet_tail "t$p")"
	at_least "$acc" $BAR || fleet_fail "t$p: final accuracy $acc < $BAR"
	ACC[$p]=$acc
done
# One start (--start agree): both processes seed alike (torch_cnn.py's
# --seed 1), so one brought its model, and the other's peer either was
# told by the first that its model is the job's start and pulled nothing,
# or, when the first had taken its 100th step by then (pull.h,
# PULL_SAME_STEPS), got the first's model at that step.
logs=$(grep -h '^attached' "$FLEET_LOGS/ta.log" "$FLEET_LOGS/tb.log" | tr '\n' ' ')
fresh=$(cat "$FLEET_LOGS/ta.log" "$FLEET_LOGS/tb.log" | grep -c "^attached: .*, fresh, step 0$")
same=$(cat "$FLEET_LOGS/a.log" "$FLEET_LOGS/b.log" | grep -c "start: .* started the job from a \
model of the same digest as this peer's process, so nothing was pulled")
late=$(cat "$FLEET_LOGS/ta.log" "$FLEET_LOGS/tb.log" |
	sed -n "s/^attached: .*, the job's model, step \([0-9]*\)$/\1/p")
if [ "$fresh $same" = "2 1" ]; then
	start="the second pulled nothing"
elif [ "$fresh $same" = "1 0" ] && [ -n "$late" ] && [ "$late" -ge 100 ]; then
	start="the second pulled the first's model at its step $late"
else
	fleet_fail "want both fresh (one peer pulled nothing) or one given the first's model \
at step 100 or later: $logs; $same peers logged that they pulled nothing"
fi
fleet_ok "both trained $STEPS steps: final accuracy ${ACC[a]} and ${ACC[b]} (>= $BAR); \
seeded alike, $start"

for p in a b; do
	fleet_wait_status "$p" .attach.state detached "show the process detached" 10
	fleet_ctl "$p" --json stats >"$FLEET_DIR/$p.stats" || fleet_fail "$p: stats"
	ex=$(fleet_json '.gossip.completed + .gossip.served' <"$FLEET_DIR/$p.stats")
	[ "$ex" -gt 0 ] || fleet_fail "$p made no exchange: $(fleet_json .gossip <"$FLEET_DIR/$p.stats")"
	step=$(fleet_status "$p" .step) || fleet_fail "$p: no status"
	[ "$step" = $STEPS ] || fleet_fail "$p is at step $step, want $STEPS"
done
fleet_ok "both exchanged; both daemons up, detached, at step $STEPS"

# A joiner's process starts from the model its daemon pulled from the
# donors (a and b, both quiet now): its attach is answered once the pull is
# done, at the donors' step, with their average to int8's rounding (the
# donors send --values' default format, gossipd(8)). How it
# scores against them depends on how far apart they drifted (on a loaded
# machine the average of two peers that mixed 1% slices for 300 steps can
# score a few points below both), so the bar is only "a trained model".
joiner() {
	fleet_port "FLEET_PORT[c]"
	fleet_gossipd c --listen "127.0.0.1:${FLEET_PORT[c]}" --key-file "$FLEET_DIR/key" \
		--join "127.0.0.1:${FLEET_PORT[a]}" --trainer external
	fleet_wait_up c
}
donors=
for p in a b; do
	out=$("${PROBE[@]}" "$FLEET_DIR/$p.sock" --save "$FLEET_DIR/$p.values" 2>&1) ||
		fleet_fail "probe of donor $p: $out"
	donors+=" $(fleet_json .accuracy <<<"$out")"
	fleet_wait_status "$p" .attach.state detached "show the probe detached" 10
done
fleet_up joiner
out=$("${PROBE[@]}" "$FLEET_DIR/c.sock" --mean "$FLEET_DIR/a.values" "$FLEET_DIR/b.values" 2>&1) ||
	fleet_fail "probe of the joiner: $out"
grep -q "bootstrap: model pulled from .*,.*; continuing" "$FLEET_LOGS/c.log" ||
	fleet_fail "c did not pull from both donors: $(fleet_tail c)"
[ "$(fleet_json '"\(.fresh) \(.step)"' <<<"$out")" = "false $STEPS" ] ||
	fleet_fail "the joiner's process did not get the pulled model at step $STEPS: $out"
at_least 1 "$(fleet_json .mean_err_int8 <<<"$out")" ||
	fleet_fail "the joiner's model is not the donors' average: $out"
jacc=$(fleet_json .accuracy <<<"$out")
at_least "$jacc" $BAR || fleet_fail "the joiner's model scores $jacc, the donors'$donors"
fleet_ctl c leave >/dev/null || fleet_fail "c: leave"
fleet_wait_exit c 30 || fleet_fail "c: leave exited $?: $(fleet_tail c)"
fleet_ok "a joiner's process starts from the donors' average: accuracy $jacc, donors'$donors"

# Without b, nothing moves a's values any more: two processes attaching one
# after the other must get the same ones.
fleet_ctl b leave >/dev/null || fleet_fail "b: leave"
fleet_wait_exit b 30 || fleet_fail "b: leave exited $?: $(fleet_tail b)"
for i in 1 2; do
	if [ $i = 1 ]; then opt=(--save "$FLEET_DIR/values"); else opt=(--same "$FLEET_DIR/values"); fi
	out=$("${PROBE[@]}" "$FLEET_DIR/a.sock" "${opt[@]}" 2>&1) || fleet_fail "probe $i: $out"
	[ "$(fleet_json '"\(.fresh) \(.step)"' <<<"$out")" = "false $STEPS" ] ||
		fleet_fail "probe $i did not get the job's model at step $STEPS: $out"
	at_least "$(fleet_json .accuracy <<<"$out")" $BAR ||
		fleet_fail "probe $i: the attached values are not the trained model's: $out"
	[ $i = 1 ] || [ "$(fleet_json .same <<<"$out")" = true ] ||
		fleet_fail "probe 2 got other values than probe 1: $out"
	fleet_wait_status a .attach.state detached "show the probe detached" 10
done
fleet_ok "a process attaching again gets the job's model: $out"

fleet_ctl a leave >/dev/null || fleet_fail "a: leave"
fleet_wait_exit a 30 || fleet_fail "a: leave exited $?: $(fleet_tail a)"
fleet_ok "the peers leave cleanly"

# One start through the Python module, by seeds: processes seeded apart
# get the lowest address's model (its values, by digest); seeded alike,
# both keep their own, and the starter counts the request it answered so.
for seeds in "5 6" "7 7"; do
	fleet_job "d e" --trainer external
	s=($seeds)
	"${PROBE[@]}" "$FLEET_DIR/d.sock" --seed "${s[0]}" >"$FLEET_DIR/pd.out" 2>&1 &
	pd=$!
	"${PROBE[@]}" "$FLEET_DIR/e.sock" --seed "${s[1]}" >"$FLEET_DIR/pe.out" 2>&1
	re=$?
	wait $pd && [ $re = 0 ] || fleet_fail "a probe failed: $(cat "$FLEET_DIR"/p[de].out)"
	low=d other=e
	[ "127.0.0.1:${FLEET_PORT[e]}" \< "127.0.0.1:${FLEET_PORT[d]}" ] && low=e other=d
	want=false
	[ "${s[0]}" = "${s[1]}" ] && want=true
	[ "$(fleet_json '"\(.fresh) \(.digest)"' <"$FLEET_DIR/p$low.out")" = \
		"true $(fleet_json .digest <"$FLEET_DIR/p$other.out")" ] &&
		[ "$(fleet_json .fresh <"$FLEET_DIR/p$other.out")" = $want ] ||
		fleet_fail "seeds $seeds: want $low fresh, $other fresh $want, one model: \
$(cat "$FLEET_DIR"/p[de].out)"
	n=$(fleet_ctl "$low" --json stats | fleet_json .pull.same_start)
	[ "$n" = "$([ $want = true ] && echo 1 || echo 0)" ] ||
		fleet_fail "seeds $seeds: $low answered $n requests of $other's that it holds the start"
	for p in d e; do fleet_stop "$p"; done
done
fleet_ok "seeded apart, the second process got the first's model; seeded alike, nothing was pulled"
