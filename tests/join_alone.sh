#!/bin/bash
# A joiner into a job whose members have all left (issue 33): it says so,
# in its log and as state "stranded" in status, and once start_timeout
# passes without a live member it gives up and exits 3, instead of waiting
# for donors forever without a word. No timing can fail it: the joiner
# waits 1 s before it says so and start_timeout (8 s) before it gives up,
# and the test waits for each of these far longer than that.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
fleet_keygen "$FLEET_DIR/key"

# The job: one member, which leaves before anybody joins through it.
fleet_member_job 1 0 1 0 0
fleet_ctl p0 leave >/dev/null || fleet_fail "leave p0"
fleet_wait_exit p0 30 || fleet_fail "p0 exited non-zero after leave"

fleet_port "FLEET_PORT[j]"
fleet_member j --join "127.0.0.1:${FLEET_PORT[p0]}" --start-timeout 8
fleet_wait_up j
fleet_wait_status j .state stranded "show state stranded" 60
fleet_wait_log j "bootstrap: no live member to pull the model from; giving up if none appears" \
	"log that it has no live member" 10
fleet_ok "a joiner whose only member left shows state stranded and says so"

rc=0
fleet_wait_exit j 90 || rc=$?
[ $rc -eq 3 ] || fleet_fail "the stranded joiner exited $rc, not 3: $(fleet_tail j)"
grep -q "no live member to pull the model from in [0-9]* s (start_timeout)" "$FLEET_DIR/j.log" ||
	fleet_fail "no reason logged: $(fleet_tail j)"
fleet_ok "it gave up after start_timeout and exited 3"
