#!/bin/bash
# An attached PyTorch trainer killed mid-training (gossipd-attach(7),
# FAULTS): while it trains, a second process is refused, its pid named; the
# SIGKILL leaves the daemon up, answering and showing it detached; a new
# process attaches to the job's model and continues from the step the
# daemon reports.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
"$PYTHON" -c 'import torch' 2>/dev/null || fleet_skip "$PYTHON cannot import torch (apt-get install python3-torch)"
export PYTHONPATH=$FLEET_TOP/src/python:$FLEET_TOP/contrib/examples${PYTHONPATH:+:$PYTHONPATH}
CNN=("$PYTHON" "$FLEET_TOP/contrib/examples/torch_cnn.py" --eval-samples 2000 --threads 1
	--socket "$FLEET_DIR/a.sock")
MORE=100

fleet_keygen "$FLEET_DIR/key"
fleet_job a --trainer external

fleet_start t1 "${CNN[@]}" --epochs 100 --log-every 10
fleet_wait_status a '.step >= 100' true "reach step 100 with t1" 60
out=$("$PYTHON" "$FLEET_TOP/tests/attach_probe.py" "$FLEET_DIR/a.sock" --refused 2>&1) ||
	fleet_fail "a second process was not refused: $out"
case $out in *"$(fleet_pid t1)"*) ;; *) fleet_fail "the refusal does not name t1's pid: $out" ;; esac
fleet_ok "a second process is refused: $(fleet_json .refused <<<"$out")"

fleet_kill KILL t1
fleet_wait_exit t1 10
fleet_wait_status a .attach.state detached "show t1 detached" 10
fleet_alive "$(fleet_pid a)" || fleet_fail "a ended with its trainer: $(fleet_tail a)"
step=$(fleet_status a .step) || fleet_fail "a does not answer status"
fleet_ok "t1 SIGKILLed at step $step; the daemon is up and shows it detached"

fleet_start t2 "${CNN[@]}" --epochs 100 --limit-steps $((step + MORE))
fleet_wait_exit t2 120 || fleet_fail "t2 exited $?: $(fleet_tail t2)"
grep -q "^attached: .*, the job's model, step $step$" "$FLEET_LOGS/t2.log" ||
	fleet_fail "t2 did not attach to the job's model at step $step: $(head -n 3 "$FLEET_LOGS/t2.log")"
now=$(fleet_status a .step) || fleet_fail "a does not answer status"
[ "$now" = $((step + MORE)) ] || fleet_fail "a is at step $now after t2, want $((step + MORE))"
fleet_ok "t2 continued from step $step to $now: $(tail -n 1 "$FLEET_LOGS/t2.log")"

fleet_ctl a leave >/dev/null || fleet_fail "a: leave"
fleet_wait_exit a 30 || fleet_fail "a: leave exited $?: $(fleet_tail a)"
