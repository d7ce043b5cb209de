#!/bin/bash
# The main job: 4 gossipd peers on 127.0.0.1 train the default MLP on
# Fashion-MNIST, each on a quarter of the data, mixing the parts of their
# models that moved most with neighbours they pick themselves. Shows live progress, then
# each peer's final test accuracy and traffic. Ctrl-C makes every peer
# leave cleanly. Extra arguments go to every gossipd (e.g. --epochs 5,
# --mode dense, --select random).
# DEMO_PORT fixes the first of the N consecutive ports the peers listen on.
set -e
. "$(dirname "$0")/../tests/fleet.sh"
N=4
leave_all() {
	for i in $(seq 0 $((N - 1))); do
		fleet_ctl "p$i" leave >/dev/null 2>&1 || true
	done
}
# Ctrl-C reaches the peers too (one process group): they leave by
# themselves. The trap only ends the monitoring loop; doing more inside it
# could interrupt a command substitution half-way.
interrupted=0
trap 'interrupted=1' INT TERM

fleet_keygen "$FLEET_DIR/job.key"
job() {
	local i peers=
	if [ -n "${DEMO_PORT:-}" ]; then BASE=$DEMO_PORT; else fleet_port BASE $N; fi
	for i in $(seq 0 $((N - 1))); do peers="$peers${peers:+,}127.0.0.1:$((BASE + i))"; done
	for i in $(seq 0 $((N - 1))); do
		fleet_gossipd "p$i" --listen "127.0.0.1:$((BASE + i))" --key-file "$FLEET_DIR/job.key" \
			--peers "$peers" --shard "$i/$N" --linger yes --eval-samples 2000 "$@"
	done
	for i in $(seq 0 $((N - 1))); do fleet_wait_up "p$i" || return; done
}
fleet_up job "$@"
echo "$N peers on 127.0.0.1:$BASE-$((BASE + N - 1)), job key and logs in $FLEET_DIR"
echo "   time  peer  state     step     acc    loss  exch  consensus   sent MB"

# From here on a failing gossipctl or jq (one killed by Ctrl-C, say) must
# not end the script before it reports.
set +e
start=$(date +%s)
while [ $interrupted -eq 0 ]; do
	done_n=0
	for i in $(seq 0 $((N - 1))); do
		s=$(fleet_ctl "p$i" --json status 2>/dev/null) || continue
		echo "$s" | fleet_json '"  \($t|tonumber|tostring|.+"s"|(" "*(5-length))+.)  p\($i)    \(.state|.+(" "*(8-length)))  \(.step|tostring|(" "*(6-length))+.)  \(if .accuracy < 0 then "  -   " else (.accuracy*10000|round/10000|tostring) end)  \(.loss*1000|round/1000)  \(.exchanges|tostring|(" "*(4-length))+.)  \(if .consensus_distance == null then "-" else (.consensus_distance*100000|round/100000|tostring) end)  \(.bytes_sent/1e6*100|round/100)"' \
			--arg t "$(( $(date +%s) - start ))" --arg i "$i"
		[ "$(echo "$s" | fleet_json .state)" = done ] && done_n=$((done_n + 1))
	done
	[ $done_n -eq $N ] || [ $interrupted -eq 1 ] && break
	alive=0
	for p in $(fleet_names); do fleet_alive "$(fleet_pid "$p")" && alive=$((alive + 1)); done
	if [ $alive -eq 0 ]; then
		echo "every peer has exited; their logs:"
		tail -n 3 "$FLEET_DIR"/p*.log
		exit 1
	fi
	sleep 2
done

echo
if [ $interrupted -eq 1 ]; then
	echo "interrupted: the peers leave (final evaluation on the whole test set):"
	leave_all
else
	echo "final:"
	for i in $(seq 0 $((N - 1))); do
		fleet_ctl "p$i" --json status 2>/dev/null | fleet_json '"  peer \($i): test accuracy \(.accuracy), \(.exchanges) exchanges, sent \(.bytes_sent/1e6*100|round/100) MB, received \(.bytes_received/1e6*100|round/100) MB, \(.elapsed*10|round/10) s"' \
			--arg i "$i"
	done
	leave_all
fi
rc=0
for i in $(seq 0 $((N - 1))); do fleet_wait_exit "p$i" 120 || rc=1; done
if [ $interrupted -eq 1 ]; then
	for i in $(seq 0 $((N - 1))); do
		sed -n "s/.*done: \(.*\)/  peer $i: \1/p" "$FLEET_DIR/p$i.log"
	done
fi
exit $rc
