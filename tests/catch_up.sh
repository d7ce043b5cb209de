#!/bin/bash
# A peer restarted from an old checkpoint catches up with the job's step
# (rounds_catch_up): 3 peers held at 50 steps a second; p2 writes a
# checkpoint every 20 steps, is SIGKILLed, and comes back with --resume
# once the others have trained on some 400 steps. Its log must say that
# it goes on from the job's step, and its own step must then lie near
# theirs, not where its checkpoint was. No timing can fail it: the job
# runs hundreds of steps ahead, and the rule moves at 9 (two rounds of 4,
# and one). A peer resumed with no job (tests/resume.sh) keeps its steps.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
fleet_keygen "$FLEET_DIR/key"
C="$FLEET_DIR/ckpt"
FLEET_ARGS[p2]="--checkpoint-dir $C --checkpoint-every 20"
common=(--max-steps 100000 --max-step-rate 50 --eval-samples 200 --seed 1)
fleet_job "p0 p1 p2" "${common[@]}"
step() { fleet_status "$1" .step; }
ahead() { # ahead NAME STEP SECONDS: until NAME's step passes STEP
	local n=0 s=
	until s=$(step "$1") && [ "$s" -gt "$2" ]; do
		n=$((n + 1))
		[ $n -gt $(($3 * 10)) ] && fleet_fail "$1 not past step $2 in $3 s (at ${s:-?})"
		sleep 0.1
	done
}

ahead p2 100 60
fleet_kill KILL p2
fleet_wait_exit p2 10 || true
newest=$(find "$C" -name 'ckpt-*.gdc' | sort | tail -n 1)
[ -n "$newest" ] || fleet_fail "p2 wrote no checkpoint"
at=$((10#$(basename "$newest" .gdc | sed 's/^ckpt-//')))
ahead p0 $((at + 400)) 60
fleet_gossipd p2 --listen "127.0.0.1:${FLEET_PORT[p2]}" --key-file "$FLEET_DIR/key" \
	--shard 2/3 --peers "127.0.0.1:${FLEET_PORT[p0]},127.0.0.1:${FLEET_PORT[p1]}" \
	${FLEET_ARGS[p2]} --resume "${common[@]}"
fleet_wait_log p2 "resumed from .* at step $at" "resume from step $at" 20
fleet_wait_log p2 "catch-up: the job is at step [0-9]+" "catch up with the job" 30
job=$(grep -Eo 'catch-up: the job is at step [0-9]+' "$FLEET_LOGS/p2.log" | grep -Eo '[0-9]+$')
[ "$job" -gt $((at + 400)) ] || fleet_fail "caught up to step $job, not past $((at + 400))"
# The trainer takes the step at the end of the one under way.
ahead p2 $((job - 1)) 10
s2=$(step p2) && s0=$(step p0) || fleet_fail "no status"
d=$((s0 > s2 ? s0 - s2 : s2 - s0))
[ "$d" -lt 100 ] || fleet_fail "p2 at step $s2, p0 at $s0 after the catch-up"
fleet_ok "p2 resumed at step $at, caught up to the job's $job ($(grep -Eo \
	'[0-9]+ steps past this resumed peer' "$FLEET_LOGS/p2.log")); now at $s2 beside p0's $s0"
