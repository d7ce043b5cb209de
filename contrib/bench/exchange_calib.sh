#!/bin/bash
# The exchange simulator (contrib/sim/exchange_sim) against live jobs, for
# calibrating its consensus distance (issue 33). N peers (default 8) of the
# built-in MLP on 127.0.0.1 on shards of Fashion-MNIST, all resuming one
# start model (one peer's first 300 steps on the whole set: the first
# steps from scratch move a model about five times as fast), held to R steps a
# second (default 8, the simulator's rate), a constant learning rate, a
# checkpoint every 20 steps, for S steps (default 480) past the start:
# once exchanging nothing (--interval 1000000), which
# measures how fast their models walk apart and which parameters do, then
# once per INTERVAL (default 4, the daemon's, and 16) with the daemon's
# defaults otherwise (delta, density 0.04, int8). contrib/bench/
# exchange_calib.py measures the consensus distance exactly from the
# checkpoints (RMS over peers of ||x_i - mean|| / sqrt(d), at each step all
# of them wrote) and runs exchange_sim on the same job from a common start,
# its --noise fitted to the run without exchanges, each parameter's noise
# alike and then scaled by its spread across those peers
# (--noise-profile), with each peer's own drift, with the trainer's
# momentum (--momentum 0.8, the noise fitted again through its ramp),
# with int8 rounding at the start model's values (--start-model), and with
# a noise that grows over the run instead of the drift (--noise-growth).
#
# Usage: contrib/bench/exchange_calib.sh [-n PEERS] [-s STEPS] [-r RATE]
#        [-m MODEL (--model, default the daemon's)] [INTERVAL...]
#        (from the build directory)
# The runs' directories are kept (their paths are printed).
FLEET_BUILD=${top_builddir:-$(pwd)}
[ -x "$FLEET_BUILD/src/gossipd" ] || { echo "run from the build directory" >&2; exit 2; }
SIM=$FLEET_BUILD/contrib/sim/exchange_sim
[ -x "$SIM" ] || { echo "$SIM is not built (make)" >&2; exit 2; }
n=8 steps=480 rate=8 model=
while getopts n:s:r:m: o; do
	case $o in
	m) model=$OPTARG ;;
	n) n=$OPTARG ;;
	s) steps=$OPTARG ;;
	r) rate=$OPTARG ;;
	*) echo "usage: $0 [-n PEERS] [-s STEPS] [-r RATE] [-m MODEL] [INTERVAL...]" >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
[ $# -gt 0 ] || set -- 4 16
for v in "$n" "$steps" "$@"; do
	[[ $v =~ ^[1-9][0-9]*$ ]] || { echo "$0: $v: not a positive whole number" >&2; exit 2; }
done
[[ $rate =~ ^[0-9]*\.?[0-9]+$ ]] && awk -v r="$rate" 'BEGIN { exit !(r > 0) }' ||
	{ echo "$0: -r $rate: not a number above 0" >&2; exit 2; }
HERE=$(cd "$(dirname "$0")" && pwd)
# Steps one peer trains the start model: past the first steps, which
# walk 8 peers apart at 0.0029 a step per parameter (0.0006 from here).
WARM=300

# job INTERVAL PEERS STEPS [START]: one live job (from the checkpoint
# START, every peer); prints its directory.
job() (
	FLEET_KEEP=1
	. "$HERE/../../tests/fleet.sh"
	local names= i
	fleet_keygen "$FLEET_DIR/key"
	for ((i = 0; i < $2; i++)); do
		names+=" p$i"
		FLEET_ARGS[p$i]="--checkpoint-dir $FLEET_DIR/p$i.ckpt${4:+ --resume}"
		[ -z "${4:-}" ] || { mkdir "$FLEET_DIR/p$i.ckpt" && cp "$4" "$FLEET_DIR/p$i.ckpt/"; }
	done
	fleet_job "$names" --interval "$1" --max-steps "$3" --epochs 1000 \
		--lr-schedule constant --warmup-epochs 0 --max-step-rate "$rate" \
		--checkpoint-every 20 --checkpoint-keep 1000 --eval-every 1000000 \
		--eval-samples 200 --seed 5 --close-budget 0 --linger no ${model:+--model "$model"} >&2
	# its steps at the rate, and two minutes to spare (a rate below 1 too)
	local wait
	wait=$(awk -v s="$3" -v r="$rate" 'BEGIN { printf "%d", s / r + 120 }')
	for ((i = 0; i < $2; i++)); do
		fleet_wait_exit "p$i" "$wait" >&2 || exit 1
	done
	echo "$FLEET_DIR"
)

pre=$(job 1000000 1 "$WARM") || exit 1
start=$(ls "$pre"/p0.ckpt/ckpt-*.gdc | tail -1)
echo "start model: $start"
none=$(job 1000000 "$n" $((WARM + steps)) "$start") || exit 1
echo "no exchanges: $none"
runs=()
for iv in "$@"; do
	d=$(job "$iv" "$n" $((WARM + steps)) "$start") || exit 1
	echo "every $iv steps: $d"
	runs+=("$iv:$d")
done
# the jobs' momentum: gossipd's default, which they leave
momentum=$("$FLEET_BUILD/src/gossipd" --help | sed -n 's/^ *--momentum X .*(default: \([0-9.]*\)).*/\1/p')
[ -n "$momentum" ] || { echo "$0: no --momentum default in gossipd --help" >&2; exit 1; }
/usr/bin/python3 "$HERE/exchange_calib.py" "$SIM" "$rate" "$momentum" "$none" "${runs[@]}"
