#!/bin/bash
# A peer left alone asks the members it heard of (issue 33). Member a
# holds b dead after b is SIGKILLed; b comes back on its address knowing
# nobody (no --peers): without a's asking, neither would ever contact the
# other and both would stay alone. No timing can fail it: a asks every
# 8 s at the slowest, and the test waits 60 s.
. "$(dirname "$0")/fleet.sh"
fleet_need_data
fleet_keygen "$FLEET_DIR/key"

fleet_member_job 2 1 1 0 0
# Up is not in touch: under load p1 could die before p0 heard of it.
fleet_member_until agree 60 "p0 and p1 to see each other alive"
fleet_kill KILL p1
fleet_wait_exit p1 10 || true
fleet_member_until 'see("p1"; "dead")' 60 "p0 to hold p1 dead"
fleet_ok "p0 holds p1 dead after $FLEET_TOOK s"

# Back on its address, told of nobody. The address may still be held a
# moment by what the kill left (fleet_wait_up returns 3): again, later.
FLEET_PORT[q]=${FLEET_PORT[p1]}
for try in 1 2 3 4 5 6 7 8 9 10; do
	fleet_member q
	rc=0
	fleet_member_up q || rc=$?
	[ $rc -eq 3 ] || break
	echo "member_rescue: p1's address still taken (try $try); again in 2 s" >&2
	sleep 2
done
[ $rc -eq 0 ] || fleet_fail "q could not listen on p1's address in 10 tries"
fleet_member_until agree 60 "p0 and p1 restarted (q) to see each other alive"
grep -q "member: no live member; asking the 1 members heard of" "$FLEET_DIR/p0.log" ||
	fleet_fail "p0 did not log that it was alone: $(fleet_tail p0)"
fleet_wait_log p0 "member: in touch with the job again" "log that it is in touch again" 10
fleet_ok "p0 asked p1's address and both are in one job again after $FLEET_TOOK s"
