#!/bin/bash
# The exchange simulator (contrib/sim/exchange_sim) at 12 peers with a
# fixed seed: the same runs every time, so it cannot fail by chance, and
# no wall-clock time enters them. Three sites, 10:1 bandwidth, a 1e8-value
# model whose exchanges across sites take longer than a round. Checks:
# exchanges pull the peers together (the distance ends well below that of
# the same run without exchanges); adaptive selection reaches 0.3x the
# starting distance sooner than random (at 12 peers its bw_ratio cut
# leaves mostly the fast links: at hundreds, stale_after makes every link
# a candidate, see README); the same seed gives the same output; bad
# options exit 2 naming the option; momentum walks as far over many steps,
# a growing noise as much farther as its variance says;
# with a quarter of the peers crashed
# and replaced by joiners that pull, exchanges with the crashed fail and
# the distance still falls.
. "$(dirname "$0")/fleet.sh"
sim="$FLEET_BUILD/contrib/sim/exchange_sim"
[ -x "$sim" ] || fleet_fail "$sim not built"
run() { "$sim" -n 12 --seed 3 --duration 60 "$@" || fleet_fail "exchange_sim $* exited $?"; }
val() { awk -v k="$1" '$1 == k { print $2 }' <<<"$2"; }
less() { awk -v x="$1" -v y="$2" 'BEGIN { exit !(x < y) }'; }

none=$(run --interval 1000000000)
rnd=$(run --select random)
ada=$(run --select adaptive)
[ "$(val exchanges "$none")" = 0 ] || fleet_fail "exchanges without rounds: $none"
for o in "$rnd" "$ada"; do
	less "$(val cd_end "$o")" "$(awk -v x="$(val cd_end "$none")" 'BEGIN { print x / 2 }')" ||
		fleet_fail "distance $(val cd_end "$o") with exchanges, $(val cd_end "$none") without"
done
tr=$(val time_to_level_s "$rnd")
ta=$(val time_to_level_s "$ada")
less -0.5 "$ta" || fleet_fail "adaptive never reached the level: $ada"
less -0.5 "$tr" || fleet_fail "random never reached the level: $rnd"
less "$ta" "$tr" || fleet_fail "adaptive took $ta s to 0.3x, random $tr s: $ada"
less "$(val same_site_share "$rnd")" "$(val same_site_share "$ada")" ||
	fleet_fail "adaptive did not prefer its own site: $ada"
# a quarter crash at 30 s; joiners pull a 1e6-value model (fast) and train
ch=$(run --wire-d 1e6 --churn 0.25)
[ "$(val killed "$ch")" = 3 ] && [ "$(val joined "$ch")" = 3 ] ||
	fleet_fail "--churn 0.25 of 12 did not kill and join 3: $ch"
less 0 "$(val failed "$ch")" || fleet_fail "no exchange with a crashed peer failed: $ch"
less "$(val cd_end "$ch")" "$(awk -v x="$(val cd_end "$none")" 'BEGIN { print x / 2 }')" ||
	fleet_fail "distance $(val cd_end "$ch") after churn, $(val cd_end "$none") without exchanges"
# Momentum keeps the walk over many steps: 480 steps walk as 474 would
# (the velocity's ramp from a common start), not 5 times as far.
walk=$(run --interval 1000000000 --init-spread 0)
mom=$(run --interval 1000000000 --init-spread 0 --momentum 0.8)
r=$(awk -v a="$(val cd_end "$mom")" -v b="$(val cd_end "$walk")" 'BEGIN { print a / b }')
awk -v r="$r" 'BEGIN { exit !(r > 0.96 && r < 1.03) }' ||
	fleet_fail "without exchanges, momentum 0.8 walked $r times as far as none"
# --noise-growth 0.01: 480 steps of variance 1 + 0.01 k walk
# sqrt(1 + 0.01 * 481 / 2) = 1.85 times as far (every peer at one rate:
# the shared drift parts peers that take different numbers of steps).
walk=$(run --interval 1000000000 --init-spread 0 --rate-spread 0)
grow=$(run --interval 1000000000 --init-spread 0 --rate-spread 0 --noise-growth 0.01)
rg=$(awk -v a="$(val cd_end "$grow")" -v b="$(val cd_end "$walk")" 'BEGIN { print a / b }')
awk -v r="$rg" 'BEGIN { exit !(r > 1.78 && r < 1.92) }' ||
	fleet_fail "without exchanges, --noise-growth 0.01 walked $rg times as far as none"
again=$(run --select adaptive)
[ "$(grep -v -E '^(cpu_s|maxrss_mib) ' <<<"$again")" = "$(grep -v -E '^(cpu_s|maxrss_mib) ' <<<"$ada")" ] ||
	fleet_fail "the same seed gave another run"

for bad in "--peers abc:peers" "--select fastest:select" "--remote-ms 5:remote-ms" \
    "--density 0:density" "--view 12:view" "--mode sparse:mode" "--loss 1:loss" \
    "--churn 0.95:churn" "--detect-s x:detect-s" "--noise-profile /dev/null:noise-profile" \
    "--momentum 1:momentum" "--start-model /dev/null:start-model" \
    "--noise-growth -1:noise-growth"; do
	set -- ${bad%:*}
	err=$("$sim" -n 12 "$@" 2>&1 >/dev/null)
	rc=$?
	[ $rc = 2 ] || fleet_fail "exchange_sim $* exited $rc, not 2"
	grep -q -- "--${bad#*:}" <<<"$err" || fleet_fail "exchange_sim $* did not name --${bad#*:}: $err"
done
fleet_ok "12 simulated peers, 60 s: distance $(val cd_end "$none") without exchanges," \
	"$(val cd_end "$rnd") random, $(val cd_end "$ada") adaptive; 0.3x after $tr s random," \
	"$ta s adaptive; churn of 3: distance $(val cd_end "$ch"); momentum's walk $r of none's;" \
	"a growing noise's $rg;" \
	"bad options exit 2"
