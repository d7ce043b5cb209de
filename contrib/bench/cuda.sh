#!/bin/sh
# cuda.sh: on a machine with an NVIDIA GPU, build the CUDA backend, check
# it against the CPU backend (tests/test_cuda), then time our training
# steps and PyTorch's side by side on the same GPU, and gossip gather /
# average-in against the device's copy bandwidth. Writes env.txt,
# test_cuda.log, ours.csv, torch.csv, cuda_summary.csv and table.txt to
# OUTDIR (seven files: the device tool brings back at most eight); build
# logs stay in the build directory and are shown when a build fails.
#
#   contrib/bench/cuda.sh [OUTDIR]       (default $OUT, else /tmp/gossipd-cuda)
#
# It first tries the real build (./configure --with-cuda). GPU machines
# often lack gossipd's other dependencies (libuv, libfabric, libsodium), so
# when configure fails it compiles just the pieces the GPU work needs
# (util, log, the two backends, the test and the benchmark) with nvcc and
# cc; without BLAS headers the CPU reference uses cblas_ref.c.
# Environment: CUDA_DIR (/usr/local/cuda), BENCH_SECONDS (3 per case),
# BUILD (build directory), DIRECT=1 (skip configure), REF_BLAS=1 (use
# cblas_ref.c even where a BLAS is installed).
set -eu

src=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:-${OUT:-/tmp/gossipd-cuda}}
build=${BUILD:-/tmp/gossipd-cuda-build}
cuda=${CUDA_DIR:-/usr/local/cuda}
secs=${BENCH_SECONDS:-3}
cc=${CC:-cc}
logs=$build/logs
mkdir -p "$out" "$build" "$logs"
out=$(cd "$out" && pwd)

note() { printf '%s\n' "$*" | tee -a "$out/env.txt"; }

: >"$out/env.txt"
note "gossipd cuda bench, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader \
    2>/dev/null | sed 's/^/gpu: /' | tee -a "$out/env.txt" || note "gpu: nvidia-smi failed"
"$cuda/bin/nvcc" --version 2>/dev/null | tail -n 2 | head -n 1 | sed 's/^/nvcc: /' |
    tee -a "$out/env.txt" || true

configured_build() {
	[ -x "$src/configure" ] || { [ -n "$(command -v autoreconf)" ] &&
	    (cd "$src" && autoreconf -fi) >"$logs/autoreconf.log" 2>&1; } || return 1
	(cd "$build" && "$src/configure" -q --with-cuda="$cuda") \
	    >"$logs/configure.log" 2>&1 || return 1
	make -C "$build" -j"$(nproc)" src/libgossip.a tests/test_cuda \
	    contrib/bench/bench_cuda >"$logs/make.log" 2>&1 || return 1
	test_bin=$build/tests/test_cuda
	bench_bin=$build/contrib/bench/bench_cuda
}

# The CUDA libraries: the toolkit's, else the pip wheels' (PyTorch images).
find_cuda_lib() {
	for dir in "$cuda/lib64" "$cuda/targets/x86_64-linux/lib" \
	    $(python3 -c 'import os, nvidia.cublas, nvidia.cuda_runtime as r
print(os.path.dirname(nvidia.cublas.__file__) + "/lib", os.path.dirname(r.__file__) + "/lib")' \
	    2>/dev/null || true); do
		for f in "$dir/lib$1.so" "$dir"/lib"$1".so.*; do
			[ -f "$f" ] && { printf '%s\n' "$f"; return 0; }
		done
	done
	return 1
}

direct_build() {
	d=$build/direct
	mkdir -p "$d/shim" || return 1
	printf '#define HAVE_CUDA 1\n' >"$d/gd_autoconf.h"
	cflags="-std=c11 -O2 -g -Wall -Wextra -D_GNU_SOURCE -I$d -I$src/src -I$src/include -I$cuda/include"
	blas=
	if [ -n "${REF_BLAS:-}" ]; then
		: # forced: use the reference below
	elif pkg-config --exists openblas 2>/dev/null; then
		cflags="$cflags $(pkg-config --cflags openblas)"
		blas=$(pkg-config --libs openblas)
		note "cpu reference: openblas"
	elif [ -f /usr/include/cblas.h ] && ldconfig -p | grep -q 'libcblas\|libopenblas'; then
		blas="-lcblas"
		ldconfig -p | grep -q libopenblas && blas="-lopenblas"
		note "cpu reference: system cblas ($blas)"
	fi
	if [ -z "$blas" ]; then
		cat >"$d/shim/cblas.h" <<'EOF'
enum CBLAS_ORDER { CblasRowMajor = 101, CblasColMajor = 102 };
enum CBLAS_TRANSPOSE { CblasNoTrans = 111, CblasTrans = 112 };
void openblas_set_num_threads(int n);
void cblas_sgemm(enum CBLAS_ORDER, enum CBLAS_TRANSPOSE, enum CBLAS_TRANSPOSE,
    int, int, int, float, const float *, int, const float *, int, float,
    float *, int);
EOF
		cflags="$cflags -I$d/shim"
		"$cc" $cflags -O3 -c "$src/contrib/bench/cblas_ref.c" -o "$d/cblas_ref.o" ||
		    return 1
		blas=$d/cblas_ref.o
		note "cpu reference: contrib/bench/cblas_ref.c (no BLAS headers here)"
	fi
	cublas=$(find_cuda_lib cublas) || { note "no libcublas found"; return 1; }
	cudart=$(find_cuda_lib cudart) || { note "no libcudart found"; return 1; }
	note "cublas: $cublas"
	note "cudart: $cudart"
	libs="$cublas $cudart -Wl,-rpath,$(dirname "$cublas") -Wl,-rpath,$(dirname "$cudart") -lstdc++ -lpthread -lm -ldl"
	"$cuda/bin/nvcc" -O3 -std=c++17 -gencode arch=compute_80,code=sm_80 \
	    -gencode arch=compute_90,code=sm_90 -Xcompiler -Wall,-Wextra \
	    -DHAVE_CONFIG_H -I"$d" -I"$src/src" -I"$src/include" \
	    -c "$src/src/backend_cuda.cu" -o "$d/backend_cuda.o" || return 1
	objs=
	for f in src/util.c src/log.c src/backend_cpu.c; do
		o=$d/$(basename "$f" .c).o
		"$cc" $cflags -c "$src/$f" -o "$o" || return 1
		objs="$objs $o"
	done
	"$cc" $cflags "$src/tests/test_cuda.c" $objs "$d/backend_cuda.o" $blas $libs \
	    -o "$d/test_cuda" || return 1
	"$cc" $cflags "$src/contrib/bench/bench_cuda.c" $objs "$d/backend_cuda.o" \
	    $blas $libs -o "$d/bench_cuda" || return 1
	test_bin=$d/test_cuda
	bench_bin=$d/bench_cuda
}

if [ -z "${DIRECT:-}" ] && configured_build; then
	note "build: configure --with-cuda ($build)"
else
	note "build: direct (the configured build failed here; logs in $logs)"
	tail -n 3 "$logs/configure.log" "$logs/make.log" 2>/dev/null || true
	direct_build >"$logs/build.log" 2>&1 || { cat "$logs/build.log"; exit 1; }
	cat "$logs/build.log"
fi

echo "== tests/test_cuda"
set +e
"$test_bin" >"$out/test_cuda.log" 2>&1
rc=$?
set -e
cat "$out/test_cuda.log"
note "test_cuda exit status: $rc"
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || echo "test_cuda FAILED (continuing to the benchmark)"

echo "== bench_cuda (ours), $secs s per case"
"$bench_bin" -s "$secs" >"$out/ours.csv" || { echo "bench_cuda failed"; exit 1; }

echo "== PyTorch, $secs s per case"
python3 "$src/contrib/bench/cuda_torch.py" --seconds "$secs" --csv "$out/torch.csv" || true

python3 "$src/contrib/bench/cuda_torch.py" --table "$out/ours.csv" "$out/torch.csv" \
    --summary "$out/cuda_summary.csv" | tee "$out/table.txt"
[ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || { echo "tests/test_cuda FAILED (exit $rc)"; exit 1; }
