#!/bin/bash
# PyTorch attached to gossipd (--trainer external) against PyTorch DDP, and
# what attaching costs a training loop. Two parts, in one run on this
# machine; the systems run one after the other, never at once, so each has
# all the cores there are.
#
# Part 1, accuracy and traffic: PEERS (4) gossipd peers on 127.0.0.1 with
# --trainer external --mode MODE --density DENSITY (delta, 0.04: gossipd's
# defaults; exchanges every 4 steps, the default interval), each with
# contrib/examples/torch_cnn.py attached on its contiguous shard i/PEERS of
# Fashion-MNIST (the training file is in no class order: the shards are
# iid); then PEERS PyTorch DDP workers (gloo,
# contrib/bench/ddp_cnn.py) training the same CNN from the same seed, with the
# same shards and batch order, batch 64 per process, SGD momentum 0.9, weight
# decay 5e-4, learning rate 0.05 with 0.5 epoch of linear warm-up then cosine
# to 0, the same number of epochs and the same evaluations (the first
# EVAL_SAMPLES test images every EVAL_EVERY steps, on every process).
# SYSTEMS="gossip" runs the gossip peers alone, for trying gossipd's options
# against a DDP run already in DIR/raw/ddp (DDP's figures do not change
# with them).
#   final accuracy   of each trainer's model at its end, on the whole test set
#   time to TARGET   seconds from the launch of the first process of the
#                    system (gossip: the first gossipd) to the first
#                    evaluation of that peer at or above TARGET; also from
#                    the start of its training (gossip: the peer's trainer
#                    attached and loaded its data; DDP: after rendezvous).
#   bytes to TARGET  bytes sent by the peer up to that evaluation: gossipd's
#                    own bytes_sent counter (all its traffic: gossip,
#                    membership, handshakes), read by the trainer through
#                    the attachment (Peer.status()) right after evaluating.
#                    DDP: the ring all-reduce volume 2(n-1)/n * 4d bytes per
#                    step per worker. Cross-checks: the gossipd counters are
#                    polled every POLL s beside ss(8)'s bytes_sent of each
#                    daemon's TCP sockets; each DDP worker reads its sockets'
#                    bytes_sent with ss at its end.
#   ratio            DDP's bytes to TARGET over each peer's (and the worst
#                    peer's, the most bytes): the issue wants >= 100.
#   steps to TARGET  the step of that evaluation; the worst peer's over
#                    DDP's: the issue wants <= 1.25.
# The issue's bars on final accuracy: every gossip peer >= BAR (0.91), and
# no more than 0.3 points below DDP's.
#
# Part 2, overhead: the same loop with and without peer.step(): a 2-peer
# gossipd job (MODE at DENSITY, interval 4; fresh daemons for each run) with
# torch_cnn.py attached to each, against the same 2 processes with
# --no-gossip, OVERHEAD_STEPS steps each from the same initial model. Runs
# alternate A B, B A, A B ... (PAIRS pairs) so that a drift of the machine's
# load hits both alike. Step time is the trainers' loop time less their
# evaluations, per step, mean over the 2 trainers; where the time goes: the
# time inside peer.step() (timed around each call by torch_cnn.py) and the
# daemons' CPU time (utime + stime from /proc/PID/stat, from just before the
# trainers start to their end; it includes the daemons' idle membership work
# while the trainers load). The issue wants gossip <= 5% slower.
#
# Usage (from anywhere; BUILD is the build directory, default this tree):
#     contrib/bench/attach.sh [--quick] [--out DIR] [--parts "accuracy overhead"]
#   --quick   a smoke run of about 2 minutes: half an epoch, 1 overhead pair of 100
#             steps (accuracy targets are not expected to be met)
#   --out DIR results directory (default contrib/bench/results-attach)
# Environment (defaults in brackets; --quick changes some):
#   BUILD [this tree]  PYTHON [/usr/bin/python3]  PEERS [4]  EPOCHS [12]
#   CHANNELS [32,64] the CNN's convolution widths  SEED [1]  MODE [delta]
#   DENSITY [0.04]  SYSTEMS [gossip ddp] part 1's systems, in that order
#   LR [0.05]  EVAL_EVERY [100] steps  EVAL_SAMPLES [2000]
#   TARGET [0.90]  BAR [0.91]  POLL [1] s between status polls
#   RUN_LIMIT [1500] s before a system's run is killed and counted as failed
#   PAIRS [3]  OVERHEAD_STEPS [400]  GOSSIPD_OPTS [] more gossipd options
# Output in DIR: accuracy-evals.csv (every evaluation), accuracy.csv (one row
# per gossip peer and one for DDP), overhead.csv (one row per trainer run),
# load.txt (uptime through the run), table.txt (also printed at the end),
# accuracy-steps.png and accuracy-bytes.png (every gossip peer's evaluations
# and DDP's against steps and against bytes sent, log scale, DDP black and
# thick; through gnuplot, contrib/bench/plot.py: without it a warning and no
# plots); raw logs under DIR/raw/ (raw/gossip/statsI.json: peer I's
# gossipctl stats as its trainer ended). contrib/bench/attach_report.py makes the
# CSV files, the table and the plots from the raw logs (it may be run again
# on them).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
usage() { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
quick=0
out=$here/results-attach
parts="accuracy overhead"
while [ $# -gt 0 ]; do
	case $1 in
	--quick) quick=1 ;;
	--out) out=${2:?--out needs a directory}; shift ;;
	--out=*) out=${1#--out=} ;;
	--parts) parts=${2:?--parts needs a list}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "attach.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done

build=${BUILD:-$top}
python=${PYTHON:-/usr/bin/python3}
npeers=${PEERS:-4}
seed=${SEED:-1}
mode=${MODE:-delta}
density=${DENSITY:-0.04}
systems=${SYSTEMS:-gossip ddp}
lr=${LR:-0.05}
channels=${CHANNELS:-32,64}
eval_samples=${EVAL_SAMPLES:-2000}
target=${TARGET:-0.90}
bar=${BAR:-0.91}
poll=${POLL:-1}
extra=${GOSSIPD_OPTS:-}
if [ $quick = 1 ]; then
	epochs=${EPOCHS:-0.5}
	eval_every=${EVAL_EVERY:-50}
	pairs=${PAIRS:-1}
	osteps=${OVERHEAD_STEPS:-100}
	run_limit=${RUN_LIMIT:-300}
else
	epochs=${EPOCHS:-12}
	eval_every=${EVAL_EVERY:-100}
	pairs=${PAIRS:-3}
	osteps=${OVERHEAD_STEPS:-400}
	run_limit=${RUN_LIMIT:-1500}
fi
FLEET_BUILD=$build
. "$top/tests/fleet.sh"

for f in "$GOSSIPD" "$GOSSIPCTL"; do
	if [ ! -x "$f" ]; then
		echo "attach.sh: $f not found: run 'make' in the build directory, or set BUILD" >&2
		exit 2
	fi
done
fleet_need_data
if ! "$python" -c 'import torch, numpy, torch.distributed' 2>/dev/null; then
	echo "attach.sh: $python cannot import torch, numpy and torch.distributed (apt-get install python3-torch)" >&2
	exit 2
fi
for p in $parts; do
	case $p in accuracy | overhead) ;; *) echo "attach.sh: unknown part $p" >&2; exit 2 ;; esac
done
for s in $systems; do
	case $s in gossip | ddp) ;; *) echo "attach.sh: unknown system $s" >&2; exit 2 ;; esac
done

mkdir -p "$out/raw"
out=$(cd "$out" && pwd)
# The report sets both systems side by side: one not run must be there.
case " $parts " in *" accuracy "*)
	for s in gossip ddp; do
		case " $systems " in *" $s "*) continue ;; esac
		if [ ! -f "$out/raw/$s/meta.json" ]; then
			echo "attach.sh: SYSTEMS leaves out $s, but $out/raw/$s holds no run of it to report beside" >&2
			exit 2
		fi
	done ;;
esac
trap 'echo "attach.sh: interrupted" >&2; exit 130' INT TERM
export PYTHONPATH=$top/src/python${PYTHONPATH:+:$PYTHONPATH}
# One thread per process, as gossipd's own trainer and ddp_torch.py.
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
CNN=("$python" "$top/contrib/examples/torch_cnn.py")
# The settings both systems train with (torch_cnn.add_training_args).
train=(--channels "$channels" --epochs "$epochs" --batch 64 --lr "$lr" --lr-schedule cosine
	--warmup-epochs 0.5 --momentum 0.9 --weight-decay 5e-4 --seed "$seed" --threads 1
	--eval-every "$eval_every" --eval-samples "$eval_samples")
gossip_opts="--trainer external --mode $mode --density $density --seed $seed"

now() { date +%s.%N; }
load() { echo "$(date +%T) $1: $(uptime)" >>"$out/load.txt"; }
: >"$out/load.txt"
load "start"
echo "attach.sh: results in $out; $(uptime)" >&2

# cpu_ticks PID...: the sum of their utime + stime, in clock ticks.
cpu_ticks() {
	local p s=0 f
	for p in "$@"; do
		# Fields after the command name, which is in parentheses.
		f=$(sed 's/^.*) //' "/proc/$p/stat" 2>/dev/null) || continue
		# shellcheck disable=SC2086 # split into fields
		set -- $f
		s=$((s + ${12} + ${13}))
	done
	echo $s
}

# alive_any NAME...: whether one of these processes still runs.
alive_any() {
	local n
	for n in "$@"; do
		[ -n "${FLEET_PID[$n]:-}" ] && fleet_alive "${FLEET_PID[$n]}" && return 0
	done
	return 1
}

# finish NAME... >FILE: waits for each (SECONDS: 60) and prints "NAME STATUS".
finish() {
	local n rc
	for n in "$@"; do
		[ -n "${FLEET_PID[$n]:-}" ] || continue
		rc=0
		fleet_wait_exit "$n" 60 || rc=$?
		echo "$n $rc"
	done
}

# launch PREFIX N JOB: N gossipd peers PREFIX0.. on consecutive free ports,
# with --trainer external, up (waiting for their process); t0 is when the
# first was started.
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

# trainer NAME OUTFILE ARGS...: torch_cnn.py ARGS, stdout (its JSON lines) to
# OUTFILE, stderr to NAME.log.
trainer() {
	local name=$1 o=$2
	shift 2
	# shellcheck disable=SC2016 # expanded by that sh
	fleet_start "$name" sh -c 'exec "$@" >"$0"' "$o" "${CNN[@]}" --json "$@"
}

run_gossip() {
	local dir=$out/raw/gossip i names=() tnames=() t
	rm -rf "${dir:?}"
	mkdir -p "$dir"
	FLEET_LOGS=$dir
	echo "== gossip: $npeers gossipd peers ($gossip_opts $extra), torch_cnn.py attached to each, $epochs epochs" >&2
	load "gossip begins"
	fleet_up launch p "$npeers" attach-bench
	: >"$dir/pids"
	for ((i = 0; i < npeers; i++)); do
		names+=("p$i")
		tnames+=("t$i")
		echo "$i $(fleet_pid "p$i")" >>"$dir/pids"
		trainer "t$i" "$dir/t$i.out" --socket "$FLEET_DIR/p$i.sock" --shard "$i/$npeers" \
			--name "t$i" "${train[@]}"
	done
	echo "{\"system\":\"gossip\",\"t0\":$t0,\"peers\":$npeers,\"options\":\"$gossip_opts $extra\",\"train\":\"${train[*]}\"}" >"$dir/meta.json"
	# Poll every peer's status and the bytes_sent of each process's TCP
	# sockets until the trainers are done or the limit passes.
	: >"$dir/status.txt"
	: >"$dir/ss.txt"
	while alive_any "${tnames[@]}"; do
		if [ "$(echo "$(now) - $t0 > $run_limit" | bc)" = 1 ]; then
			echo "attach.sh: gossip ran past ${run_limit}s; killing it" >&2
			echo timeout >"$dir/timeout"
			fleet_stop "${tnames[@]}"
			break
		fi
		for ((i = 0; i < npeers; i++)); do
			t=$(now)
			if st=$(fleet_ctl "p$i" --json status 2>/dev/null); then
				echo "$t $i $st" >>"$dir/status.txt"
			fi
		done
		t=$(now)
		ss -tinpH 2>/dev/null | awk -v t="$t" '
			/^[^ \t]/ { pid = ""; if (match($0, /pid=[0-9]+,/)) pid = substr($0, RSTART + 4, RLENGTH - 5); next }
			pid != "" && match($0, /bytes_sent:[0-9]+/) { s[pid] += substr($0, RSTART + 11, RLENGTH - 11) }
			END { for (p in s) print t, p, s[p] }' >>"$dir/ss.txt" || true
		sleep "$poll"
	done
	load "gossip trainers done"
	finish "${tnames[@]}" >"$dir/rc"
	for ((i = 0; i < npeers; i++)); do
		t=$(now)
		if st=$(fleet_ctl "p$i" --json status 2>/dev/null); then
			echo "$t $i $st" >>"$dir/status.txt"
		fi
		fleet_ctl "p$i" --json stats >"$dir/stats$i.json" 2>/dev/null || true
		fleet_ctl "p$i" leave >/dev/null 2>&1 || true
	done
	finish "${names[@]}" >>"$dir/rc"
}

run_ddp() {
	local dir=$out/raw/ddp r port names=()
	rm -rf "${dir:?}"
	mkdir -p "$dir"
	FLEET_LOGS=$dir
	fleet_port port
	echo "== ddp: $npeers PyTorch DDP workers (gloo) on 127.0.0.1:$port, $epochs epochs" >&2
	load "ddp begins"
	t0=$(now)
	for ((r = 0; r < npeers; r++)); do
		names+=("w$r")
		# shellcheck disable=SC2016 # expanded by that sh
		fleet_start "w$r" sh -c 'exec "$@" >"$0"' "$dir/w$r.out" \
			"$python" "$here/ddp_cnn.py" --rank "$r" --world "$npeers" --port "$port" "${train[@]}"
	done
	echo "{\"system\":\"ddp\",\"t0\":$t0,\"peers\":$npeers,\"options\":\"gloo\",\"train\":\"${train[*]}\"}" >"$dir/meta.json"
	while alive_any "${names[@]}"; do
		if [ "$(echo "$(now) - $t0 > $run_limit" | bc)" = 1 ]; then
			echo "attach.sh: ddp ran past ${run_limit}s; killing it" >&2
			echo timeout >"$dir/timeout"
			fleet_stop "${names[@]}"
			break
		fi
		sleep 0.5
	done
	load "ddp done"
	finish "${names[@]}" >"$dir/rc"
}

# overhead_run K MODE: run K of part 2, MODE gossip or alone.
overhead_run() {
	local k=$1 mode=$2 dir=$out/raw/overhead i c0 c1 tn=() pn=()
	local args=(--limit-steps "$osteps" --epochs 100 --eval-every 0 --eval-samples 500
		--channels "$channels" --batch 64 --lr "$lr" --momentum 0.9 --weight-decay 5e-4
		--seed "$seed" --threads 1)
	FLEET_LOGS=$dir
	echo "== overhead run $k: $mode, 2 trainers, $osteps steps" >&2
	echo "$k $mode begin $(now) $(cat /proc/loadavg)" >>"$dir/runs.txt"
	if [ "$mode" = gossip ]; then
		fleet_up launch "o${k}p" 2 "attach-overhead-$k"
		pn=("o${k}p0" "o${k}p1")
		c0=$(cpu_ticks "$(fleet_pid "${pn[0]}")" "$(fleet_pid "${pn[1]}")")
		for i in 0 1; do
			trainer "o${k}t$i" "$dir/$k-$mode-t$i.out" --socket "$FLEET_DIR/o${k}p$i.sock" \
				--shard "$i/2" --name "o${k}t$i" "${args[@]}"
			tn+=("o${k}t$i")
		done
	else
		for i in 0 1; do
			trainer "o${k}t$i" "$dir/$k-$mode-t$i.out" --no-gossip --shard "$i/2" "${args[@]}"
			tn+=("o${k}t$i")
		done
	fi
	while alive_any "${tn[@]}"; do sleep 0.2; done
	if [ "$mode" = gossip ]; then
		c1=$(cpu_ticks "$(fleet_pid "${pn[0]}")" "$(fleet_pid "${pn[1]}")")
		echo "$k $(echo "($c1 - $c0) / $(getconf CLK_TCK)" | bc -l)" >>"$dir/daemon_cpu.txt"
	fi
	echo "$k $mode end $(now) $(cat /proc/loadavg)" >>"$dir/runs.txt"
	finish "${tn[@]}" >>"$dir/rc"
	for i in "${pn[@]}"; do fleet_ctl "$i" leave >/dev/null 2>&1 || true; done
	finish "${pn[@]}" >>"$dir/rc"
}

run_overhead() {
	local dir=$out/raw/overhead p k=0 m
	rm -rf "${dir:?}"
	mkdir -p "$dir"
	: >"$dir/runs.txt"
	: >"$dir/daemon_cpu.txt"
	: >"$dir/rc"
	echo "{\"pairs\":$pairs,\"steps\":$osteps,\"channels\":\"$channels\",\"options\":\"$gossip_opts $extra\"}" >"$dir/meta.json"
	load "overhead begins"
	for ((p = 0; p < pairs; p++)); do
		if [ $((p % 2)) = 0 ]; then m="gossip alone"; else m="alone gossip"; fi
		for mode in $m; do
			k=$((k + 1))
			overhead_run "$k" "$mode"
		done
	done
	load "overhead done"
}

fleet_keygen "$FLEET_DIR/bench.key"
for p in $parts; do
	case $p in
	accuracy) for s in $systems; do "run_$s"; done ;;
	overhead) run_overhead ;;
	esac
done
load "end"

# shellcheck disable=SC2086 # a list of words
"$python" "$here/attach_report.py" --out "$out" --target "$target" --bar "$bar" $parts
