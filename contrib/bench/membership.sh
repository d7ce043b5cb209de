#!/bin/bash
# Membership on this machine beside the simulator of the same protocol
# code, for calibrating contrib/sim/membership_sim. For N peers (default
# 8 32), each started with a list naming itself and 2 random others (no
# address nobody listens on, as the simulator has none: a peer asks such
# a seed again and again, which is membership traffic the simulator does
# not count): the time until every peer lists all N alive,
# the membership bytes each peer sends per second of steady state, then
# K SIGKILLs of random peers (at most N - J - 3; never p0), a clean leave
# (SIGTERM) and J joins through p0, one at a time, in membership_sim's
# order, each timed until it is in every view; all of it R times. Then
# membership_sim runs the same events (one site, 0.05 ms, seeds 1-S) and
# a table sets the two side by side.
#
# The times come from the peers' logs (each state change is a line
# stamped to the millisecond), not from polling every view: 32 `gossipctl
# peers` twenty times a second keep 2 cores busy and delay the peers they
# ask. A kill or leave is timed from just before the signal, a join from
# the joiner's endpoint opening (membership_sim: its start). Peers train
# one step and linger, so 32 of them fit on 2 cores. A killed process's
# kernel refuses new connections, but the transport on 127.0.0.1 does not
# tell a sender so (libfabric's tcp provider keeps the send until the
# transport's deadline): the simulator's --crash silent is the live case.
#
# Usage: contrib/bench/membership.sh [-k KILLS] [-j JOINS] [-r ROUNDS]
#        [-s SEEDS] [-c CSV] [N...]
#        (from the build directory; defaults 10, 2, 2, 5)
# Writes membership.csv (one row per event) in the current directory; with
# -c, reads the live rows from CSV (an earlier run's) and only simulates.
FLEET_BUILD=${top_builddir:-$(pwd)}
[ -x "$FLEET_BUILD/src/gossipd" ] || { echo "run from the build directory" >&2; exit 2; }
SIM=$FLEET_BUILD/contrib/sim/membership_sim
[ -x "$SIM" ] || { echo "$SIM is not built (make)" >&2; exit 2; }
kills=10 joins=2 rounds=2 seeds=5 from=
while getopts k:j:r:s:c: o; do
	case $o in
	c) from=$OPTARG ;;
	k) kills=$OPTARG ;;
	j) joins=$OPTARG ;;
	r) rounds=$OPTARG ;;
	s) seeds=$OPTARG ;;
	*) echo "usage: $0 [-k KILLS] [-j JOINS] [-r ROUNDS] [-s SEEDS] [-c CSV] [N...]" >&2
		exit 2 ;;
	esac
done
shift $((OPTIND - 1))
. "$(dirname "$0")/../../tests/fleet.sh"
[ $# -gt 0 ] || set -- 8 32
GAP=3	# seconds between two events once the last is everywhere
STEADY=20

# bench_sod: this moment in seconds since the local midnight, as log.c
# stamps its lines.
bench_sod() {
	local now=$EPOCHREALTIME hms h m s
	printf -v hms '%(%H %M %S)T' "${now%.*}"
	read -r h m s <<<"$hms"
	echo "$((10#$h * 3600 + 10#$m * 60 + 10#$s)).${now#*.}"
}

# bench_first ERE SINCE NAME...: for each NAME, the time (seconds of the
# day) of the first line of its log at or after SINCE that matches ERE;
# "-" for a log without one. One process reads every log: the wait below
# asks five times a second, and a fork per peer would load the machine
# whose timing it measures.
bench_first() {
	local ere=$1 since=$2 n files=()
	shift 2
	for n in "$@"; do files+=("$FLEET_LOGS/$n.log"); done
	awk -v ere="$ere" -v since="$since" '
		FILENAME in at { next }
		{ split($1, t, ":"); s = t[1] * 3600 + t[2] * 60 + t[3] }
		s >= since - 0.0005 && $0 ~ ere { at[FILENAME] = sprintf("%.3f", s) }
		END { for (i = 1; i < ARGC; i++) print (ARGV[i] in at) ? at[ARGV[i]] : "-" }' \
		"${files[@]}"
}

# bench_until_all ERE SINCE SECONDS WHAT NAME...: until every NAME's log
# has a line matching ERE from SINCE on; prints the latest of those times
# less SINCE, and the earliest.
bench_until_all() {
	local ere=$1 since=$2 secs=$3 what=$4 t out
	shift 4
	for ((t = 0; ; t++)); do
		out=$(bench_first "$ere" "$since" "$@")
		case $out in *-*) ;; *) break ;; esac
		[ $t -gt $((secs * 5)) ] && fleet_fail "$what: not in every log within $secs s"
		sleep 0.2
	done
	sort -g <<<"$out" | awk -v s="$since" 'NR == 1 { lo = $1 } { hi = $1 }
		END { printf "%.3f %.3f\n", hi - s, lo - s }'
}

# bench_bytes NAME...: the membership bytes each NAME has sent, the clock
# beside each.
bench_bytes() {
	local n
	for n in "$@"; do
		printf '%s %s ' "$n" "$EPOCHREALTIME"
		fleet_ctl "$n" --json status | jq -r '.bytes_sent_by_type // {} |
			[.ping, .ping_ack, .ping_req, .sync, .member_gossip | . // 0] | add'
	done
}

bench_addr() { echo "127\\.0\\.0\\.1:${FLEET_PORT[$1]}"; }

# bench_gone KIND SIGNAL NAME STATE: NAME ends by SIGNAL; the row KIND of
# $csv: until every other of $names has it STATE, and until the first
# doubted it (or had it STATE).
bench_gone() {
	local kind=$1 sig=$2 v=$3 state=$4 t0 hi lo first
	t0=$(bench_sod)
	fleet_kill "$sig" "$v"
	fleet_wait_exit "$v" 15 2>/dev/null
	read -r hi lo < <(bench_until_all "member $(bench_addr "$v") \\([0-9a-f]+\\): [a-z]+ -> $state" \
		"$t0" 60 "$v's end" "${names[@]}")
	first=$(bench_first "member $(bench_addr "$v") \\([0-9a-f]+\\): alive -> " "$t0" \
		"${names[@]}" | grep -v -- - | sort -g | head -n 1)
	csv+=("$n,$kind,$hi,$(awk -v f="${first:-$t0}" -v s="$t0" 'BEGIN { printf "%.3f", f - s }')")
}

# bench_live N ROUND: one job of N peers, its steady traffic, kills, a
# leave and joins in membership_sim's order, as rows of $csv.
bench_live() {
	local n=$1 names=() i j k v t0 hi lo b0 b1 steady
	rm -f "$FLEET_DIR/key"
	fleet_keygen "$FLEET_DIR/key"
	fleet_member_job "$n" 2 "$((n + 1000 * $2))" 0 0
	fleet_member_until agree 120 start
	for ((i = 0; i < n; i++)); do names+=("p$i"); done
	sleep 10
	b0=$(bench_bytes "${names[@]}")
	sleep "$STEADY"
	b1=$(bench_bytes "${names[@]}")
	steady=$(join <(sort <<<"$b0") <(sort <<<"$b1") |
		awk '{ r += ($5 - $3) / ($4 - $2) } END { printf "%.0f", r / NR }')
	csv+=("$n,steady_bytes_per_peer_s,$steady,")
	RANDOM=$((n + 1000 * $2))
	# p0 stays: the joiners come through it.
	for ((k = 0; k <= bench_kills; k++)); do
		i=$((1 + RANDOM % (${#names[@]} - 1)))
		v=${names[i]}
		names=("${names[@]:0:i}" "${names[@]:i+1}")
		if [ $k -lt "$bench_kills" ]; then
			bench_gone kill_dead KILL "$v" dead
		else
			bench_gone leave_left TERM "$v" left
		fi
		sleep "$GAP"
	done
	for ((j = 0; j < joins; j++)); do
		fleet_member_join "j$j" p0
		t0=$(bench_first 'fabric endpoint on' 0 "j$j")
		read -r hi lo < <(bench_until_all "member $(bench_addr "j$j") \\([0-9a-f]+\\) appeared" \
			"$t0" 60 "j$j's join" "${names[@]}")
		csv+=("$n,join_known,$hi,$lo")
		names+=("j$j")
		sleep "$GAP"
	done
	# No one holds another dead: the kills' deaths were true ones.
	fleet_member_look agree || fleet_fail "views do not agree after the events"
	printf 'N=%d round %d: steady %s B/peer/s; kills, a leave and joins timed\n' "$n" "$2" "$steady"
	# shellcheck disable=SC2046 # names are single words
	fleet_stop $(fleet_names)
	FLEET_ID=()
}

csv=()
if [ -n "$from" ]; then
	mapfile -t csv < <(tail -n +2 "$from") || exit 2
else
	for n in "$@"; do
		bench_kills=$((kills < n - joins - 3 ? kills : n - joins - 3))
		for ((r = 1; r <= rounds; r++)); do bench_live "$n" "$r"; done
	done
	{
		echo "peers,what,seconds_or_bytes,first_s"
		printf '%s\n' "${csv[@]}"
	} >membership.csv
fi

# bench_stat CSV-ROWS COLUMN: "median / max" of a column.
bench_stat() {
	cut -d, -f"$1" | sort -g | awk '{ v[NR] = $1 } END {
		if (NR == 0) { print "-"; exit }
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.2f / %.2f\n", m, v[NR] }'
}
# bench_rows ROWS KIND EXPR: EXPR (awk, of $3 the time everywhere and $4
# the first) over the rows of KIND, "median / max".
bench_rows() {
	printf '%s\n' "$1" | awk -F, -v k="$2" '$2 == k { print '"$3"' }' | bench_stat 1
}
printf '\n| peers | what | live: median / max | simulated (%d seeds): median / max | live / simulated (medians) |\n' "$seeds"
echo "|---|---|---|---|---|"
for n in "$@"; do
	simrows=()
	for ((s = 1; s <= seeds; s++)); do
		out=$(nice "$SIM" -n "$n" --sites 1 --local-ms 0.05 --crash silent --seed "$s" \
			--kills "$((kills < n - joins - 3 ? kills : n - joins - 3))" --joins "$joins" \
			--steady-s "$STEADY" --gap-s 15) ||
			fleet_fail "membership_sim -n $n failed"
		simrows+=("$(awk -v n="$n" 'BEGIN { to["kill"] = "dead"; to["leave"] = "left"; to["join"] = "known" }
			$1 == "event" { print n "," $2 "_" to[$2] "," $8 "," $6 }
			$1 == "steady_frame_bytes_per_peer_s" { print n ",steady_bytes_per_peer_s," $2 }' <<<"$out")")
	done
	live=$(printf '%s\n' "${csv[@]}" | awk -F, -v n="$n" '$1 == n')
	sim=$(printf '%s\n' "${simrows[@]}")
	while read -r what kind expr; do
		l=$(bench_rows "$live" "$kind" "$expr")
		m=$(bench_rows "$sim" "$kind" "$expr")
		r=$(awk -v l="${l%% *}" -v m="${m%% *}" 'BEGIN { if (m > 0) printf "%.2f", l / m }')
		printf '| %d | %s | %s | %s | %s |\n' "$n" "${what//_/ }" "$l" "$m" "$r"
	done <<-'EOF'
	killed:_first_suspect_(s) kill_dead $4
	killed:_dead_everywhere_(s) kill_dead $3
	left_everywhere_(s) leave_left $3
	join:_first_member_knows_(s) join_known $4
	join:_known_everywhere_(s) join_known $3
	join:_first_to_everywhere_(s) join_known $3-$4
	steady_membership_B/peer/s steady_bytes_per_peer_s $3
	EOF
done
[ -n "$from" ] || echo "CSV: $(pwd)/membership.csv"
