#!/bin/bash
# The membership simulator (contrib/sim/membership_sim) at 50 peers, with
# a fixed seed: the same run every time, so it cannot fail by chance.
# Three sites (0.1 ms within, 20-50 ms between), 1% of messages late by a
# retransmission; 3 kills, a leave, 2 joins. A killed peer must be dead in
# every live view within 5 s (the defaults give 1-3 probe periods to
# notice, 2 s of suspicion and the spread: about 3 s), the leave and the
# joins must reach every view, and no live peer may ever be declared dead.
# Then 2,000 peers started warm (each knowing the whole job): a joiner
# must list everyone within 5 s, walking the table in slices (member.h);
# taking turns from random members, it took 12 and 82 s.
. "$(dirname "$0")/fleet.sh"
sim="$FLEET_BUILD/contrib/sim/membership_sim"
[ -x "$sim" ] || fleet_fail "$sim not built"
out=$("$sim" -n 50 --seed 7 --loss 0.01 --steady-s 20 --kills 3 --joins 2 --gap-s 10) ||
	fleet_fail "membership_sim exited $?"
val() { awk -v k="$1" '$1 == k { print $2 }' <<<"$out"; }
within() { awk -v x="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(x >= lo && x <= hi) }'; }
for k in agree_s kill_dead_max_s leave_left_max_s join_known_max_s join_full_view_max_s; do
	[ -n "$(val $k)" ] || fleet_fail "no $k in: $out"
done
within "$(val agree_s)" 0 10 || fleet_fail "50 peers agree after $(val agree_s) s (not within 10 s)"
within "$(val kill_dead_max_s)" 0 5 ||
	fleet_fail "a killed peer is dead everywhere after $(val kill_dead_max_s) s (not within 5 s): $out"
within "$(val leave_left_max_s)" 0 5 || fleet_fail "leave everywhere after $(val leave_left_max_s) s"
within "$(val join_known_max_s)" 0 5 || fleet_fail "a join everywhere after $(val join_known_max_s) s"
[ "$(val false_deaths)" = 0 ] || fleet_fail "$(val false_deaths) views declared a live peer dead"
warm=$("$sim" -n 2000 --start warm --seed 7 --loss 0.01 --steady-s 5 --kills 1 --joins 2 \
	--gap-s 5) || fleet_fail "membership_sim --start warm exited $?"
full=$(awk '$1 == "join_full_view_max_s" { print $2 }' <<<"$warm")
within "$full" 0 5 || fleet_fail "a joiner into 2,000 lists everyone after $full s (not within 5 s): $warm"
fleet_ok "50 simulated peers: agree $(val agree_s) s after the last start; killed peer dead everywhere after $(val kill_dead_median_s) s median, $(val kill_dead_max_s) s max; leave $(val leave_left_max_s) s; joins $(val join_known_max_s) s; $(val false_suspicions) false suspicions, 0 false deaths; a joiner into 2,000 lists all after $full s"
