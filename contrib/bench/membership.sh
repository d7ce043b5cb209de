#!/bin/bash
# Membership convergence on this machine: for N peers (default 8 16 32),
# each started with a list naming itself, 2 random others and an address
# nobody listens on, measure the time until every peer lists all N alive
# (from the moment the last one's control socket answers), until a joiner
# is in every view, and until a SIGKILLed peer is dead in every view.
# Peers train one step and linger, so 32 of them fit on 2 cores.
# Usage: contrib/bench/membership.sh [N...]   (from the build directory)
# Writes membership.csv in the current directory and prints a table.
FLEET_BUILD=${top_builddir:-$(pwd)}
[ -x "$FLEET_BUILD/src/gossipd" ] || { echo "run from the build directory" >&2; exit 2; }
. "$(dirname "$0")/../../tests/fleet.sh"
[ $# -gt 0 ] || set -- 8 16 32
rows=()
for n in "$@"; do
	# Each size is a job of its own, with a key of its own.
	rm -f "$FLEET_DIR/key"
	fleet_keygen "$FLEET_DIR/key"
	t0=$(fleet_now)
	fleet_member_job "$n" 2 "$n"
	up=$(fleet_since "$t0")
	fleet_member_until agree 60 start
	start=$FLEET_TOOK
	fleet_member_join joiner p0
	fleet_member_until 'agree and see("joiner"; "alive")' 60 join
	join=$FLEET_TOOK
	kv=p$((n / 2))
	fleet_kill KILL "$kv"
	# Its end is the point, not news: no "Killed" from bash.
	fleet_wait_exit "$kv" 10 2>/dev/null
	fleet_member_until "see(\"$kv\"; \"dead\")" 60 kill "127.0.0.1:${FLEET_PORT[$kv]}"
	kill=$FLEET_TOOK
	rows+=("$n $up $start $join $kill")
	printf 'N=%-3d up %.1f s  agree after start %.2f s  after join %.2f s  dead after SIGKILL %.2f s\n' \
		"$n" "$up" "$start" "$join" "$kill"
	# shellcheck disable=SC2046 # names are single words
	fleet_stop $(fleet_names)
	FLEET_ID=()
done
{
	echo "peers,startup_s,agree_after_start_s,agree_after_join_s,dead_after_kill_s"
	for r in "${rows[@]}"; do
		# shellcheck disable=SC2086 # a row is five numbers
		printf '%d,%.2f,%.3f,%.3f,%.3f\n' $r
	done
} >membership.csv
printf '\n| peers | all up (s) | agree after start (s) | after join (s) | dead everywhere after SIGKILL (s) | that / suspicion_timeout |\n'
echo "|---|---|---|---|---|---|"
for r in "${rows[@]}"; do
	read -r n up start join kill <<<"$r"
	printf '| %d | %.1f | %.2f | %.2f | %.2f | %.2f |\n' "$n" "$up" "$start" "$join" "$kill" \
		"$(awk -v k="$kill" 'BEGIN { print k / 2 }')"
done
echo "CSV: $(pwd)/membership.csv"
