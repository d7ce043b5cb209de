#!/bin/bash
# The job of contrib/demo.sh with PyTorch doing the training: N (default 4)
# gossipd peers on 127.0.0.1 with --trainer external, and beside each one
# contrib/examples/torch_cnn.py attached through the Python module gossipd,
# training a small CNN on its own part of Fashion-MNIST. The peers mix
# slices of the models they share with the trainers' memory. Shows live
# progress, one line per peer every second, then each trainer's final test
# accuracy. Ctrl-C makes every peer leave; their trainers end at their next
# step. Everything started is stopped on exit.
#
# usage: contrib/attach_demo.sh [TRAINER ARGS...] [-- GOSSIPD ARGS...]
# e.g. contrib/attach_demo.sh --epochs 3 --lr 0.02 -- --mode dense
# N sets the number of peers; DEMO_PORT fixes the first of the N consecutive
# ports the peers listen on; PYTHON the Python with torch (/usr/bin/python3).
set -e
. "$(dirname "$0")/../tests/fleet.sh"
N=${N:-4}
fleet_need_data
"$PYTHON" -c 'import torch' 2>/dev/null ||
	fleet_fail "$PYTHON cannot import torch (apt-get install python3-torch)"
trainer_args=()
while [ $# -gt 0 ] && [ "$1" != -- ]; do
	trainer_args+=("$1")
	shift
done
[ $# -eq 0 ] || shift

# Ctrl-C reaches the peers (they leave by themselves) but not the trainers:
# a script's background commands ignore SIGINT, so they end at the step
# boundary where their peer says it leaves. The trap only ends the loop.
interrupted=0
trap 'interrupted=1' INT TERM

fleet_keygen "$FLEET_DIR/job.key"
job() {
	local i peers=
	if [ -n "${DEMO_PORT:-}" ]; then BASE=$DEMO_PORT; else fleet_port BASE "$N"; fi
	for i in $(seq 0 $((N - 1))); do peers="$peers${peers:+,}127.0.0.1:$((BASE + i))"; done
	for i in $(seq 0 $((N - 1))); do
		fleet_gossipd "p$i" --listen "127.0.0.1:$((BASE + i))" --key-file "$FLEET_DIR/job.key" \
			--peers "$peers" --trainer external "$@"
	done
	for i in $(seq 0 $((N - 1))); do fleet_wait_up "p$i" || return; done
}
fleet_up job "$@"
export PYTHONPATH=$FLEET_TOP/src/python${PYTHONPATH:+:$PYTHONPATH}
for i in $(seq 0 $((N - 1))); do
	fleet_start "t$i" "$PYTHON" "$FLEET_TOP/contrib/examples/torch_cnn.py" --socket "$FLEET_DIR/p$i.sock" \
		--shard "$i/$N" --epochs 2 --eval-every 100 --eval-samples 2000 --name "t$i" \
		"${trainer_args[@]}"
done
echo "$N peers on 127.0.0.1:$BASE-$((BASE + N - 1)), a torch_cnn.py attached to each;" \
	"job key and logs in $FLEET_DIR"
echo "   time  peer trainer     step     acc    loss   exch  consensus   sent MB"
# One line of a peer's status: the table's columns, "-" for what is not known yet.
LINE='def pad($n): tostring | " " * ($n - length) + .;
def num($x; $k): if $x == null or $x < 0 then "-" else $x * $k | round / $k end;
"\($t + "s" | pad(7))  p\($i)   \(.attach.state | . + " " * (9 - length))\(.step | pad(7))  \(num(.accuracy; 10000) | pad(6))  \(num(.loss; 1000) | pad(6))  \(.exchanges | pad(5))  \(num(.consensus_distance; 100000) | pad(9))  \(.bytes_sent / 1e6 * 100 | round / 100 | pad(8))"'

# From here on a failing gossipctl or jq (one killed by Ctrl-C, say) must
# not end the script before it reports.
set +e
start=$(date +%s)
while [ $interrupted -eq 0 ]; do
	for i in $(seq 0 $((N - 1))); do
		fleet_ctl "p$i" --json status 2>/dev/null |
			fleet_json "$LINE" --arg t "$(($(date +%s) - start))" --arg i "$i"
	done
	training=0
	for i in $(seq 0 $((N - 1))); do fleet_alive "$(fleet_pid "t$i")" && training=$((training + 1)); done
	[ $training -eq 0 ] && break
	sleep 1
done

echo
if [ $interrupted -eq 1 ]; then
	echo "interrupted: the peers leave, their trainers end at their next step"
else
	for i in $(seq 0 $((N - 1))); do fleet_ctl "p$i" leave >/dev/null 2>&1; done
fi
rc=0
for i in $(seq 0 $((N - 1))); do
	fleet_wait_exit "t$i" 120 || rc=1
	fleet_wait_exit "p$i" 120 || rc=1
done
echo "final:"
for i in $(seq 0 $((N - 1))); do
	acc=$(sed -n 's/^final accuracy //p' "$FLEET_DIR/t$i.log")
	if [ -n "$acc" ]; then
		echo "  peer $i: test accuracy $acc ($(sed -n 's/^trained //p' "$FLEET_DIR/t$i.log"))"
	else
		echo "  peer $i: its trainer failed:"
		fleet_tail "t$i" 5 | sed 's/^/    /'
		rc=1
	fi
done
exit $rc
