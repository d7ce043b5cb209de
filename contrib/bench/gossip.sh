#!/bin/bash
# Gossip training against all-reduce, side by side in one run on this
# machine: 8 gossipd peers on 127.0.0.1 with iid shards in `saps` mode (1%
# slices) and in `dense` mode (whole model, the in-binary baseline), 8
# PyTorch DDP workers (gloo all-reduce, same MLP, batch 64 per worker, same
# SGD and schedule shape), and the `saps` job again on label-skewed shards
# (dirichlet:0.5) with the same budget. The systems run one after the other,
# never at once, so each has both cores.
#
# Measured, per system (contrib/bench/gossip_report.py does the arithmetic):
#   time to TARGET  seconds from the launch of the first process to the first
#                   moment the MEAN over the peers of each peer's latest
#                   evaluation is >= TARGET (every peer must have evaluated
#                   once). DDP's workers hold one model, so it is its own
#                   evaluation. Also given from the start of training (the
#                   first gossipd step of any peer; DDP: after rendezvous).
#                   The "every peer >= TARGET" time is in summary.csv.
#   bytes to TARGET bytes sent per peer at that moment, mean over peers:
#                   gossipd's own bytes_sent counter (all its traffic:
#                   gossip, membership, handshakes), polled every POLL s and
#                   interpolated in time; DDP: the ring all-reduce volume
#                   2(n-1)/n * 4d bytes per step, checked at the end against
#                   the bytes_sent of the workers' TCP sockets (ss).
#   final accuracy  on the whole test set (10000 images): gossipd peers'
#                   final checkpoints, evaluated by gossip_report.py; DDP's
#                   model. Periodic evaluations use the first EVAL_SAMPLES
#                   test images in both systems, on every peer or worker.
#   average model   gossipd: the mean of the peers' final checkpoints, on
#                   the whole test set, and each peer's distance to it
#                   (||x_p - mean|| / ||mean||, mean and max over peers):
#                   how far the peers are from agreeing on the job's model
#                   (contrib/bench/ckpt_average.py, also usable alone).
#
# Run from the build directory (or set BUILD):
#     contrib/bench/gossip.sh [OUTDIR]     (default OUTDIR: ./bench-gossip)
# Environment (defaults in brackets):
#   BUILD         directory holding src/gossipd and src/gossipctl [.]
#   PYTHON        Python with torch and numpy [/usr/bin/python3]
#   PEERS [8]  EPOCHS [20]  SEED [1]  DENSITY [0.01]  INTERVAL [4]
#   EVAL_EVERY [40] steps   EVAL_SAMPLES [2000]   TARGET [0.85]
#   DDP_LR [0.05]   the DDP learning rate (gossipd's default is 0.05: the
#                   mean of 8 gossip peers moves like DDP at that rate)
#   SYSTEMS ["saps dense ddp noniid"]   which runs, in this order
#   RUN_LIMIT [240] seconds before a run is killed and counted as failed
#   POLL [0.5]      seconds between status polls of the gossipd peers
#   GOSSIPD_OPTS [] more options for every gossipd (e.g. --select random)
# Ports: free ones, from tests/fleet.sh: consecutive ones for each gossipd
# run, one for the DDP rendezvous (gloo's own pair sockets take ephemeral
# ports).
# Output in OUTDIR: SYSTEM-evals.csv (every evaluation: time, peer, step,
# accuracy, bytes sent), SYSTEM-job.csv (the job's mean/min accuracy and
# mean bytes per peer against time), summary.csv, table.md (also printed);
# raw logs under OUTDIR/raw/SYSTEM/.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
out=${1:-./bench-gossip}
build=${BUILD:-.}
python=${PYTHON:-/usr/bin/python3}
npeers=${PEERS:-8}
epochs=${EPOCHS:-20}
seed=${SEED:-1}
density=${DENSITY:-0.01}
interval=${INTERVAL:-4}
eval_every=${EVAL_EVERY:-40}
eval_samples=${EVAL_SAMPLES:-2000}
target=${TARGET:-0.85}
ddp_lr=${DDP_LR:-0.05}
systems=${SYSTEMS:-saps dense ddp noniid}
run_limit=${RUN_LIMIT:-240}
extra=${GOSSIPD_OPTS:-}
poll=${POLL:-0.5}
FLEET_BUILD=$build
. "$here/../../tests/fleet.sh"

for f in "$GOSSIPD" "$GOSSIPCTL"; do
	if [ ! -x "$f" ]; then
		echo "gossip.sh: $f not found: run 'make src/gossipd src/gossipctl' in the build directory, or set BUILD" >&2
		exit 2
	fi
done
if ! "$python" -c 'import torch, numpy' 2>/dev/null; then
	echo "gossip.sh: $python cannot import torch and numpy (apt-get install python3-torch)" >&2
	exit 2
fi

mkdir -p "$out/raw"
out=$(cd "$out" && pwd)
trap 'echo "gossip.sh: interrupted" >&2; exit 130' INT TERM

now() { date +%s.%N; }

# stop_all: TERM first (gossipd leaves cleanly), KILL what is left after 3 s.
stop_all() {
	# shellcheck disable=SC2046 # names are single words
	fleet_stop $(fleet_names)
}

# launch EXTRA_OPTIONS...: run $name's gossipd peers on consecutive free
# ports, up; t0 is when the first was started.
launch() {
	local base list= i=0
	fleet_port base "$npeers"
	while [ $i -lt "$npeers" ]; do
		list="$list${list:+,}127.0.0.1:$((base + i))"
		i=$((i + 1))
	done
	echo "== $name: $npeers gossipd peers on 127.0.0.1:$base.., $* ($epochs epochs)" >&2
	t0=$(now)
	: >"$dir/pids"
	i=0
	while [ $i -lt "$npeers" ]; do
		mkdir -p "$dir/ckpt$i"
		# shellcheck disable=SC2086 # GOSSIPD_OPTS is a list of words
		fleet_gossipd "p$i" --listen "127.0.0.1:$((base + i))" --key-file "$FLEET_DIR/$name.key" \
			--peers "$list" --shard "$i/$npeers" \
			--job "bench-$name" --seed "$seed" --epochs "$epochs" \
			--eval-every "$eval_every" --eval-samples "$eval_samples" \
			--density "$density" --interval "$interval" \
			--checkpoint-dir "$dir/ckpt$i" --checkpoint-every 100000000 \
			--checkpoint-keep 1 "$@" $extra
		echo "$i $(fleet_pid "p$i")" >>"$dir/pids"
		i=$((i + 1))
	done
	i=0
	while [ $i -lt "$npeers" ]; do
		fleet_wait_up "p$i" 120 || return
		i=$((i + 1))
	done
}

# run_gossip NAME EXTRA_OPTIONS...
run_gossip() {
	name=$1
	shift
	dir=$out/raw/$name
	rm -rf "${dir:?}"
	mkdir -p "$dir"
	FLEET_LOGS=$dir
	fleet_keygen "$FLEET_DIR/$name.key"
	fleet_up launch "$@"
	echo "{\"system\":\"$name\",\"kind\":\"gossipd\",\"t0\":$t0,\"peers\":$npeers,\"epochs\":$epochs,\"options\":\"$* $extra\"}" >"$dir/meta.json"
	# Poll every peer's status (and, as a cross-check, the bytes_sent of
	# each process's TCP sockets) until all are gone or the limit passes.
	: >"$dir/status.txt"
	: >"$dir/ss.txt"
	while fleet_any_alive; do
		if [ "$(echo "$(now) - $t0 > $run_limit" | bc)" = 1 ]; then
			echo "gossip.sh: $name ran past ${run_limit}s; killing it" >&2
			echo "timeout" >"$dir/timeout"
			stop_all
			break
		fi
		i=0
		while [ $i -lt "$npeers" ]; do
			t=$(now)
			if st=$(fleet_ctl "p$i" --json status 2>/dev/null); then
				echo "$t $i $st" >>"$dir/status.txt"
			fi
			i=$((i + 1))
		done
		t=$(now)
		ss -tinpH 2>/dev/null | awk -v t="$t" '
			/^[^ \t]/ { pid = ""; if (match($0, /pid=[0-9]+,/)) pid = substr($0, RSTART + 4, RLENGTH - 5); next }
			pid != "" && match($0, /bytes_sent:[0-9]+/) { s[pid] += substr($0, RSTART + 11, RLENGTH - 11) }
			END { for (p in s) print t, p, s[p] }' >>"$dir/ss.txt" || true
		sleep "$poll"
	done
	fleet_reap "$dir/rc"
}

run_ddp() {
	name=$1
	dir=$out/raw/$name
	rm -rf "${dir:?}"
	mkdir -p "$dir"
	FLEET_LOGS=$dir
	fleet_port port
	echo "== $name: $npeers PyTorch DDP workers (gloo) on 127.0.0.1:$port, lr $ddp_lr ($epochs epochs)" >&2
	t0=$(now)
	r=0
	while [ $r -lt "$npeers" ]; do
		# stdout (the evaluations) to w$r.out, stderr to w$r.log
		# shellcheck disable=SC2016 # expanded by that sh
		fleet_start "w$r" sh -c 'exec "$@" >"$0"' "$dir/w$r.out" \
			env OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 \
			"$python" "$here/ddp_torch.py" --rank "$r" --world "$npeers" \
			--port "$port" --epochs "$epochs" --lr "$ddp_lr" --seed "$seed" \
			--eval-every "$eval_every" --eval-samples "$eval_samples"
		r=$((r + 1))
	done
	echo "{\"system\":\"$name\",\"kind\":\"ddp\",\"t0\":$t0,\"peers\":$npeers,\"epochs\":$epochs,\"options\":\"gloo lr $ddp_lr\"}" >"$dir/meta.json"
	while fleet_any_alive; do
		if [ "$(echo "$(now) - $t0 > $run_limit" | bc)" = 1 ]; then
			echo "gossip.sh: $name ran past ${run_limit}s; killing it" >&2
			echo "timeout" >"$dir/timeout"
			stop_all
			break
		fi
		sleep 0.5
	done
	fleet_reap "$dir/rc"
}

for s in $systems; do
	case $s in
	saps) run_gossip saps --mode saps --partition iid ;;
	dense) run_gossip dense --mode dense --partition iid ;;
	noniid) run_gossip noniid --mode saps --partition dirichlet:0.5 ;;
	ddp) run_ddp ddp ;;
	*) echo "gossip.sh: unknown system $s" >&2; exit 2 ;;
	esac
done

# shellcheck disable=SC2086 # SYSTEMS is a list of words
"$python" "$here/gossip_report.py" --target "$target" --density "$density" --out "$out" $systems
