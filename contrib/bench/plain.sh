#!/bin/bash
# A plain PyTorch loop, not tuned for gossip, attached to gossipd against the
# same loop alone and under PyTorch DDP (issue 31). The loop is
# contrib/examples/torch_mnist.py: the PyTorch examples' MNIST network and
# loop (Adadelta lr 1.0, StepLR gamma 0.7 per epoch, batch 64, dropout) on
# Fashion-MNIST, seeded per process, attached with the README's three lines
# only. Three systems, run one after the other (never at once), for each
# EPOCHS in EPOCHS_LIST and each of REPEATS repeats:
#   alone   the loop on shard i/PEERS (i < ALONE_SHARDS; the 4 run side by
#           side, each by itself), seed S+i
#   ddp     contrib/bench/ddp_mnist.py: PEERS ranks (gloo, 127.0.0.1), rank i
#           on shard i/PEERS with seed S+i, model in DistributedDataParallel
#           (rank 0's parameters broadcast at the start); one model, so one row
#   gossip  PEERS gossipd peers on 127.0.0.1 (--trainer external, a job key,
#           --listen/--peers, each its own control socket; default settings
#           plus GOSSIPD_OPTS), one torch_mnist.py attached to each, peer i
#           on shard i/PEERS with seed S+i
# where S = SEED * 1000 + 10 * repeat: every process starts from a model of
# its own, the same seeds in the three systems. A process's accuracy is its
# model's on the whole 10k test set at the end of its last epoch.
# The issue's checks, on the medians over repeats of each system's mean and
# min (alone: the mean over its shards):
#   1 epoch:  gossip mean >= alone mean + 0.01, gossip min >= alone mean
#   3 epochs: gossip mean >= ddp - 0.005,       gossip min >= ddp - 0.01
#
# Usage (from anywhere; BUILD is the build directory, default this tree):
#     contrib/bench/plain.sh [--out DIR] [--systems "alone ddp gossip"]
#   --out DIR  results directory (default contrib/bench/results-plain)
# Environment (defaults in brackets):
#   BUILD [this tree]  PYTHON [/usr/bin/python3]  EPOCHS_LIST ["1 3"]
#   REPEATS [3]  PEERS [4]  ALONE_SHARDS [4] (1: shard 0 only)  SEED [1]
#   TEST_BATCH [64] test batch of every process: the examples' 1000 gives
#     the same accuracy but is ten times slower on one thread here
#   RUN_LIMIT [1800] s before a system's run is killed and counted as failed
#   GOSSIPD_OPTS [] more gossipd options
# Output in DIR: plain.csv (system,epochs,repeat,peer,accuracy,loss,seed,
# seconds; one row per process, ddp one per run), runs.csv (each system run's
# wall time and status), table.txt (also printed); raw logs under DIR/raw/.
# contrib/bench/plain_report.py makes the CSV files and the table from the
# raw logs (it may be run again on them).
set -eu

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
usage() { sed -n '2,/^set -eu/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
out=$here/results-plain
systems="alone ddp gossip"
while [ $# -gt 0 ]; do
	case $1 in
	--out) out=${2:?--out needs a directory}; shift ;;
	--out=*) out=${1#--out=} ;;
	--systems) systems=${2:?--systems needs a list}; shift ;;
	-h | --help) usage; exit 0 ;;
	*) echo "plain.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done

build=${BUILD:-$top}
python=${PYTHON:-/usr/bin/python3}
epochs_list=${EPOCHS_LIST:-1 3}
repeats=${REPEATS:-3}
npeers=${PEERS:-4}
alone_shards=${ALONE_SHARDS:-4}
seed=${SEED:-1}
test_batch=${TEST_BATCH:-64}
run_limit=${RUN_LIMIT:-1800}
extra=${GOSSIPD_OPTS:-}
FLEET_BUILD=$build
. "$top/tests/fleet.sh"

for f in "$GOSSIPD" "$GOSSIPCTL"; do
	if [ ! -x "$f" ]; then
		echo "plain.sh: $f not found: run 'make' in the build directory, or set BUILD" >&2
		exit 2
	fi
done
fleet_need_data
if ! "$python" -c 'import torch, torch.distributed' 2>/dev/null; then
	echo "plain.sh: $python cannot import torch and torch.distributed (apt-get install python3-torch)" >&2
	exit 2
fi
for s in $systems; do
	case $s in alone | ddp | gossip) ;; *) echo "plain.sh: unknown system $s" >&2; exit 2 ;; esac
done
[ "$alone_shards" -le "$npeers" ] || { echo "plain.sh: ALONE_SHARDS > PEERS" >&2; exit 2; }

mkdir -p "$out/raw"
out=$(cd "$out" && pwd)
export PYTHONPATH=$top/src/python${PYTHONPATH:+:$PYTHONPATH}
# One thread per process (the scripts also call torch.set_num_threads(1)).
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
MNIST=("$python" "$top/contrib/examples/torch_mnist.py")

now() { date +%s.%N; }

# alive_any NAME...: whether one of these processes still runs.
alive_any() {
	local n
	for n in "$@"; do
		[ -n "${FLEET_PID[$n]:-}" ] && fleet_alive "${FLEET_PID[$n]}" && return 0
	done
	return 1
}

# await LIMIT NAME...: waits for them, LIMIT seconds from $t0 at most (then
# stops them and says "timeout"); prints "NAME STATUS" for each.
await() {
	local limit=$1 n rc
	shift
	while alive_any "$@"; do
		if [ "$(echo "$(now) - $t0 > $limit" | bc)" = 1 ]; then
			echo "plain.sh: past ${limit}s; stopping $*" >&2
			fleet_stop "$@"
			echo timeout
			return
		fi
		sleep 0.5
	done
	for n in "$@"; do
		[ -n "${FLEET_PID[$n]:-}" ] || continue
		rc=0
		wait "${FLEET_PID[$n]}" 2>/dev/null || rc=$?
		unset "FLEET_PID[$n]"
		echo "$n $rc"
	done
}

# py NAME OUTFILE ARGS...: ARGS with stdout (JSON lines) to OUTFILE, stderr to NAME.log.
py() {
	local name=$1 o=$2
	shift 2
	# shellcheck disable=SC2016 # expanded by that sh
	fleet_start "$name" sh -c 'exec "$@" >"$0"' "$o" "$@"
}

# launch N JOB: N gossipd peers p0.. on consecutive free ports, up.
launch() {
	local n=$1 job=$2 base list="" i
	fleet_port base "$n"
	for ((i = 0; i < n; i++)); do list+=${list:+,}127.0.0.1:$((base + i)); done
	for ((i = 0; i < n; i++)); do
		# shellcheck disable=SC2086 # a list of words
		fleet_gossipd "p$i" --listen "127.0.0.1:$((base + i))" --key-file "$FLEET_DIR/job.key" \
			--peers "$list" --job "$job" --trainer external $extra
	done
	for ((i = 0; i < n; i++)); do fleet_wait_up "p$i" 60 || return; done
}

# run SYSTEM EPOCHS REPEAT: one run of SYSTEM, raw output in DIR/raw/SYSTEM-EPOCHS-REPEAT/.
run() {
	local sys=$1 e=$2 r=$3 s dir i port names=() peers=() status took
	s=$((seed * 1000 + 10 * r))
	dir=$out/raw/$sys-$e-$r
	rm -rf "${dir:?}"
	mkdir -p "$dir"
	FLEET_LOGS=$dir
	echo "== $sys, $e epochs, repeat $r (seeds from $s); $(uptime)" >&2
	t0=$(now)
	case $sys in
	alone)
		for ((i = 0; i < alone_shards; i++)); do
			py "a$i" "$dir/$i.out" "${MNIST[@]}" --json --test-batch-size "$test_batch" \
				--epochs "$e" --shard "$i/$npeers" --seed $((s + i))
			names+=("a$i")
		done
		;;
	ddp)
		fleet_port port
		py ddp "$dir/0.out" "$python" "$here/ddp_mnist.py" --json --test-batch-size "$test_batch" \
			--epochs "$e" --world "$npeers" --port "$port" --seed "$s"
		names=(ddp)
		;;
	gossip)
		fleet_up launch "$npeers" "plain-$e-$r"
		for ((i = 0; i < npeers; i++)); do
			py "t$i" "$dir/$i.out" "${MNIST[@]}" --json --test-batch-size "$test_batch" \
				--epochs "$e" --shard "$i/$npeers" --seed $((s + i)) --socket "$FLEET_DIR/p$i.sock"
			names+=("t$i")
			peers+=("p$i")
		done
		;;
	esac
	await "$run_limit" "${names[@]}" >"$dir/rc"
	took=$(echo "$(now) - $t0" | bc)
	if [ ${#peers[@]} -gt 0 ]; then
		for i in "${peers[@]}"; do fleet_ctl "$i" leave >/dev/null 2>&1 || true; done
		t0=$(now)
		await 60 "${peers[@]}" >>"$dir/rc"
	fi
	status=ok
	awk '$2 != 0 && $1 !~ /^p/ { bad = 1 } END { exit !bad }' "$dir/rc" && status=failed
	grep -q timeout "$dir/rc" && status=timeout
	# system,epochs,repeat,seconds (start to the trainers' end),status,first seed
	echo "$sys,$e,$r,$took,$status,$s" >"$dir/run"
}

fleet_keygen "$FLEET_DIR/job.key"
echo "plain.sh: results in $out; EPOCHS_LIST=\"$epochs_list\" REPEATS=$repeats" \
	"PEERS=$npeers ALONE_SHARDS=$alone_shards GOSSIPD_OPTS=\"$extra\"" >&2
start=$(now)
for e in $epochs_list; do
	for ((r = 0; r < repeats; r++)); do
		for sys in $systems; do run "$sys" "$e" "$r"; done
	done
done
echo "plain.sh: $(echo "$(now) - $start" | bc | cut -d. -f1) s in all" >&2
"$python" "$here/plain_report.py" --out "$out"
