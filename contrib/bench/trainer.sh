#!/bin/sh
# Trainer throughput, ours against PyTorch, side by side: the same MLP
# (784-256-128-10), batch, float32, thread count and SGD step (momentum 0.9,
# weight decay 5e-4) on random data in memory. Runs are interleaved (ours,
# torch, ours, torch, ...) so load from elsewhere hits both alike; each run
# keeps its best round and the median over REPS runs is reported. bench_trainer
# also times the bare cblas_sgemm calls of one step (same shapes, transposes
# and threads): the ceiling our step can reach, reported as "% of sgemm".
# The two ratio columns are medians of the per-rep ratios (each taken between
# runs made seconds apart), so they need not equal the ratio of the medians.
#
# Build first:  make contrib/bench/bench_trainer
# Run:          contrib/bench/trainer.sh [CSV]   (from the build directory)
# Environment:  BENCH_TRAINER (default ./contrib/bench/bench_trainer),
#               PYTHON (default /usr/bin/python3), REPS (default 5),
#               BATCHES (default "64 256"), THREADS (default "1 2").
#
# Torch is run twice per rep, with its default SGD and with foreach=True
# (multi-tensor kernels), and the faster of the two is its figure. It gets
# OMP_WAIT_POLICY=PASSIVE: on 2 cores its spinning OpenMP workers otherwise
# fight OpenBLAS's threads and it runs several times slower at 2 threads.
set -eu

csv=${1:-./bench-trainer.csv}
here=$(cd "$(dirname "$0")" && pwd)
bench=${BENCH_TRAINER:-./contrib/bench/bench_trainer}
python=${PYTHON:-/usr/bin/python3}
reps=${REPS:-5}
batches=${BATCHES:-64 256}
threads_list=${THREADS:-1 2}

if [ ! -x "$bench" ]; then
	echo "trainer.sh: $bench not found; run 'make contrib/bench/bench_trainer' in the build directory" >&2
	exit 2
fi
if ! "$python" -c 'import torch' 2>/dev/null; then
	echo "trainer.sh: $python cannot import torch (apt-get install python3-torch)" >&2
	exit 2
fi

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT

field() {
	# field NAME LINE: the value of NAME=... in a key=value line
	echo "$2" | tr ' ' '\n' | sed -n "s/^$1=//p"
}

rep=1
while [ "$rep" -le "$reps" ]; do
	for b in $batches; do
		for t in $threads_list; do
			export OMP_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" MKL_NUM_THREADS="$t"
			o=$("$bench" -b "$b" -t "$t")
			p1=$(OMP_WAIT_POLICY=PASSIVE "$python" "$here/trainer_torch.py" -b "$b" -t "$t")
			p2=$(OMP_WAIT_POLICY=PASSIVE "$python" "$here/trainer_torch.py" -b "$b" -t "$t" --foreach)
			echo "$b $t $(field ours_sps "$o") $(field sgemm_limit_sps "$o") $(field torch_sps "$p1") $(field torch_sps "$p2")" >>"$raw"
			echo "rep $rep batch $b threads $t: $o | torch $(field torch_sps "$p1") foreach $(field torch_sps "$p2")" >&2
		done
	done
	rep=$((rep + 1))
done

echo "batch,threads,ours_sps,torch_sps,torch_default_sps,torch_foreach_sps,ratio,sgemm_limit_sps,pct_of_sgemm_limit,reps" >"$csv"
for b in $batches; do
	for t in $threads_list; do
		awk -v b="$b" -v t="$t" -v reps="$reps" '
		function median(a, n,    i, j, x) {
			for (i = 2; i <= n; i++) {
				x = a[i]
				for (j = i - 1; j >= 1 && a[j] > x; j--)
					a[j + 1] = a[j]
				a[j + 1] = x
			}
			return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
		}
		$1 == b && $2 == t {
			n++
			ours[n] = $3; lim[n] = $4; td[n] = $5; tf[n] = $6
			tb[n] = $5 > $6 ? $5 : $6
			rt[n] = $3 / tb[n]; pl[n] = 100 * $3 / $4
		}
		END {
			printf "%d,%d,%.0f,%.0f,%.0f,%.0f,%.3f,%.0f,%.1f,%d\n", b, t,
			    median(ours, n), median(tb, n), median(td, n), median(tf, n),
			    median(rt, n), median(lim, n), median(pl, n), n
		}' "$raw" >>"$csv"
	done
done

echo
printf '%6s %8s %14s %14s %7s %12s\n' batch threads "ours samples/s" "torch samples/s" ratio "% of sgemm"
tail -n +2 "$csv" | while IFS=, read -r b t o tt td tf r l p n; do
	printf '%6s %8s %14s %15s %6sx %11s%%\n' "$b" "$t" "$o" "$tt" "$r" "$p"
done
echo "(median of $reps interleaved runs; CSV in $csv)"
