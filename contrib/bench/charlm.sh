#!/bin/bash
# A small transformer language model trained by PyTorch attached to gossipd
# (--trainer external) against the same model trained by PyTorch DDP: the
# validation loss at equal steps and the bytes each worker sends. The
# systems run one after the other on this machine, never at once.
#
# gossip  PEERS (4) gossipd peers on 127.0.0.1 (--trainer external, one job
#         key, each listing all in --peers, one control socket each), with
#         contrib/examples/torch_charlm.py attached to each: the character
#         model on its contiguous shard i/PEERS of the training part of the
#         "fortunes" text, its own batch draws (--data-seed 1000 i + SEED),
#         all from the same initial model (--seed SEED); AdamW's state stays
#         in each process. gossipd options: --mode MODE --density DENSITY
#         (exchanges every 4 steps, the default interval) and GOSSIPD_OPTS.
# ddp     PEERS PyTorch DDP workers (gloo, contrib/bench/ddp_charlm.py), the
#         same model, seed, shards, batch draws, batch per worker, schedule
#         and evaluations; the gradient all-reduced each step.
# alone   (with --systems "... alone") the PEERS trainers of gossip with
#         --no-gossip: what mixing gains over training each shard alone.
# Every trainer computes the validation loss (the same fixed windows of the
# validation part) every EVAL_EVERY steps and at STEPS.
#   val loss   at each evaluation step: each peer's, their mean, DDP's; the
#              ratio of a peer's to DDP's at the same step
#   bytes      a peer's: gossipd's own bytes_sent counter (all its traffic:
#              gossip, membership, handshakes), read by the trainer through
#              the attachment (Peer.status()) right after evaluating. DDP's:
#              the ring all-reduce volume 2(n-1)/n * 4d bytes per step per
#              worker (each worker's ss(8) bytes_sent at its end is kept as
#              a cross-check). The closing phase a peer runs when it leaves,
#              after its trainer's last step, is not counted.
# The issue's checks, at step STEPS: every peer's validation loss within
# LOSS_TOL (2%) of DDP's, and DDP's bytes per worker >= BYTES_RATIO (100)
# times the most bytes a peer sent.
#
# Usage (from anywhere; BUILD is the build directory, default this tree):
#     contrib/bench/charlm.sh [--quick] [--out DIR] [--systems "gossip ddp alone"]
#   --quick    a smoke run of 60 steps with a smaller model (about 2 minutes)
#   --out DIR  results directory (default contrib/bench/results-charlm)
#   --systems  which to run, in that order (default "gossip ddp")
# Environment (defaults in brackets; --quick changes some):
#   BUILD [this tree]  PYTHON [/usr/bin/python3]  PEERS [4]  STEPS [400]
#   EVAL_EVERY [50]  EVAL_BATCHES [8]  BATCH [16] windows per step and worker
#   CONTEXT [64]  WIDTH [256]  LAYERS [4]  HEADS [4]  LR [2e-3]  MIN_LR [2e-4]
#   WARMUP [40] steps  SEED [1]  MODE [delta]  DENSITY [0.04] (gossipd's defaults)
#   GOSSIPD_OPTS [] more gossipd options  LOSS_TOL [0.02]  BYTES_RATIO [100]
#   RUN_LIMIT [1200] s before a system's run is killed and counted as failed
# The defaults (3.2 M parameters, 400 steps) take about 6 to 8 minutes per
# system on a 2-core machine.
# Output in DIR: evals.csv (every evaluation of every trainer), summary.csv
# (one row per evaluation step), table.txt (also printed at the end),
# load.txt (uptime through the run); raw logs under DIR/raw/.
# contrib/bench/charlm_report.py makes them from the raw logs (it may be run
# again on them).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
usage() { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
quick=0
out=$here/results-charlm
systems="gossip ddp"
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--out) out=${2:?--out needs a directory}; shift ;;
	--out=*) out=${1#--out=} ;;
	--systems) systems=${2:?--systems needs a list}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "charlm.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done

build=${BUILD:-$top}
python=${PYTHON:-/usr/bin/python3}
npeers=${PEERS:-4}
seed=${SEED:-1}
mode=${MODE:-delta}
density=${DENSITY:-0.04}
extra=${GOSSIPD_OPTS:-}
loss_tol=${LOSS_TOL:-0.02}
bytes_ratio=${BYTES_RATIO:-100}
if [ $quick = 1 ]; then
	steps=${STEPS:-60}
	eval_every=${EVAL_EVERY:-20}
	width=${WIDTH:-128}
	warmup=${WARMUP:-10}
	run_limit=${RUN_LIMIT:-300}
else
	steps=${STEPS:-400}
	eval_every=${EVAL_EVERY:-50}
	width=${WIDTH:-256}
	warmup=${WARMUP:-40}
	run_limit=${RUN_LIMIT:-1200}
fi
FLEET_BUILD=$build
. "$top/tests/fleet.sh"

for f in "$GOSSIPD" "$GOSSIPCTL"; do
	if [ ! -x "$f" ]; then
		echo "charlm.sh: $f not found: run 'make' in the build directory, or set BUILD" >&2
		exit 2
	fi
done
if [ ! -f /usr/share/games/fortunes/cookie ]; then
	echo "charlm.sh: no /usr/share/games/fortunes (apt-get install fortunes)" >&2
	exit 2
fi
if ! "$python" -c 'import torch, torch.distributed' 2>/dev/null; then
	echo "charlm.sh: $python cannot import torch and torch.distributed (apt-get install python3-torch)" >&2
	exit 2
fi
for s in $systems; do
	case $s in gossip | ddp | alone) ;; *) echo "charlm.sh: unknown system $s" >&2; exit 2 ;; esac
done

mkdir -p "$out/raw"
out=$(cd "$out" && pwd)
trap 'echo "charlm.sh: interrupted" >&2; exit 130' INT TERM
export PYTHONPATH=$top/src/python${PYTHONPATH:+:$PYTHONPATH}
# One thread per process.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
LM=("$python" "$top/contrib/examples/torch_charlm.py")
# The settings every system trains with (torch_charlm.add_training_args).
train=(--steps "$steps" --batch "${BATCH:-16}" --context "${CONTEXT:-64}" --width "$width"
	--layers "${LAYERS:-4}" --heads "${HEADS:-4}" --lr "${LR:-2e-3}" --min-lr "${MIN_LR:-2e-4}"
	--warmup "$warmup" --weight-decay 0.1 --clip 1.0 --seed "$seed" --threads 1
	--eval-every "$eval_every" --eval-batches "${EVAL_BATCHES:-8}")
gossip_opts="--trainer external --mode $mode --density $density --seed $seed"

now() { date +%s.%N; }
load() { echo "$(date +%T) $1: $(uptime)" >>"$out/load.txt"; }
: >"$out/load.txt"
load "start"
echo "charlm.sh: results in $out; $(uptime)" >&2

alive_any() {
	local n
	for n in "$@"; do
		[ -n "${FLEET_PID[$n]:-}" ] && fleet_alive "${FLEET_PID[$n]}" && return 0
	done
	return 1
}

# finish NAME...: waits for each (60 s) and prints "NAME STATUS".
finish() {
	local n rc
	for n in "$@"; do
		[ -n "${FLEET_PID[$n]:-}" ] || continue
		rc=0
		fleet_wait_exit "$n" 60 || rc=$?
		echo "$n $rc"
	done
}

# wait_limit DIR NAME...: until they end, or RUN_LIMIT s after t0 (then killed).
wait_limit() {
	local dir=$1
	shift
	while alive_any "$@"; do
		if [ "$(echo "$(now) - $t0 > $run_limit" | bc)" = 1 ]; then
			echo "charlm.sh: $(basename "$dir") ran past ${run_limit}s; killing it" >&2
			echo timeout >"$dir/timeout"
			fleet_stop "$@"
			break
		fi
		sleep 0.5
	done
}

# launch PREFIX N JOB: N gossipd peers PREFIX0.. on consecutive free ports,
# up and waiting for their process; t0 is when the first was started.
launch() {
	local prefix=$1 n=$2 job=$3 base list="" i
	fleet_port base "$n"
	for ((i = 0; i < n; i++)); do list+=${list:+,}127.0.0.1:$((base + i)); done
	t0=$(now)
	for ((i = 0; i < n; i++)); do
		# shellcheck disable=SC2086 # lists of words
		fleet_gossipd "$prefix$i" --listen "127.0.0.1:$((base + i))" \
			--key-file "$FLEET_DIR/bench.key" --peers "$list" --job "$job" \
			$gossip_opts $extra
	done
	for ((i = 0; i < n; i++)); do fleet_wait_up "$prefix$i" 60 || return; done
}

# trainer NAME OUTFILE ARGS...: torch_charlm.py --json ARGS, stdout to
# OUTFILE, stderr to NAME.log.
trainer() {
	local name=$1 o=$2
	shift 2
	# shellcheck disable=SC2016 # expanded by that sh
	fleet_start "$name" sh -c 'exec "$@" >"$0"' "$o" "${LM[@]}" --json "$@"
}

meta() {
	echo "{\"system\":\"$1\",\"t0\":$t0,\"peers\":$npeers,\"options\":\"$2\",\"train\":\"${train[*]}\"}" >"$3/meta.json"
}

run_gossip() {
	local dir=$out/raw/gossip i names=() tnames=()
	rm -rf "${dir:?}"
	mkdir -p "$dir"
	FLEET_LOGS=$dir
	echo "== gossip: $npeers gossipd peers ($gossip_opts $extra), torch_charlm.py attached to each, $steps steps" >&2
	load "gossip begins"
	fleet_up launch p "$npeers" charlm-bench
	for ((i = 0; i < npeers; i++)); do
		names+=("p$i")
		tnames+=("t$i")
		trainer "t$i" "$dir/t$i.out" --socket "$FLEET_DIR/p$i.sock" --shard "$i/$npeers" \
			--data-seed $((1000 * i + seed)) --name "t$i" "${train[@]}"
	done
	meta gossip "$gossip_opts $extra" "$dir"
	wait_limit "$dir" "${tnames[@]}"
	load "gossip trainers done"
	finish "${tnames[@]}" >"$dir/rc"
	: >"$dir/status-end.txt"
	for ((i = 0; i < npeers; i++)); do
		echo "$i $(fleet_ctl "p$i" --json status 2>/dev/null || echo null)" >>"$dir/status-end.txt"
		fleet_ctl "p$i" leave >/dev/null 2>&1 || true
	done
	finish "${names[@]}" >>"$dir/rc"
	echo "{\"t_end\":$(now)}" >"$dir/end.json"
}

run_ddp() {
	local dir=$out/raw/ddp r port names=()
	rm -rf "${dir:?}"
	mkdir -p "$dir"
	FLEET_LOGS=$dir
	fleet_port port
	echo "== ddp: $npeers PyTorch DDP workers (gloo) on 127.0.0.1:$port, $steps steps" >&2
	load "ddp begins"
	t0=$(now)
	for ((r = 0; r < npeers; r++)); do
		names+=("w$r")
		# shellcheck disable=SC2016 # expanded by that sh
		fleet_start "w$r" sh -c 'exec "$@" >"$0"' "$dir/w$r.out" \
			"$python" "$here/ddp_charlm.py" --rank "$r" --world "$npeers" --port "$port" \
			--data-seed $((1000 * r + seed)) "${train[@]}"
	done
	meta ddp gloo "$dir"
	wait_limit "$dir" "${names[@]}"
	load "ddp done"
	finish "${names[@]}" >"$dir/rc"
	echo "{\"t_end\":$(now)}" >"$dir/end.json"
}

run_alone() {
	local dir=$out/raw/alone i names=()
	rm -rf "${dir:?}"
	mkdir -p "$dir"
	FLEET_LOGS=$dir
	echo "== alone: $npeers torch_charlm.py --no-gossip, $steps steps" >&2
	load "alone begins"
	t0=$(now)
	for ((i = 0; i < npeers; i++)); do
		names+=("a$i")
		trainer "a$i" "$dir/a$i.out" --no-gossip --shard "$i/$npeers" \
			--data-seed $((1000 * i + seed)) "${train[@]}"
	done
	meta alone none "$dir"
	wait_limit "$dir" "${names[@]}"
	load "alone done"
	finish "${names[@]}" >"$dir/rc"
	echo "{\"t_end\":$(now)}" >"$dir/end.json"
}

fleet_keygen "$FLEET_DIR/bench.key"
for s in $systems; do "run_$s"; done
load "end"

"$python" "$here/charlm_report.py" --out "$out" --loss-tol "$loss_tol" --bytes-ratio "$bytes_ratio"
