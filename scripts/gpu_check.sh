#!/usr/bin/env bash
# Copyright 2026 The dtensor Authors.
#
# The one script every session runs on the lent GPU machine (Ubuntu 24.04,
# pip libtorch with CUDA in /opt/torch/.venv, Open MPI, NCCL, GoogleTest and
# Google Benchmark installed, no network, no Abseil). It configures dtensor
# with the NCCL backend into build-gpu, builds everything, runs every CTest
# test and, with --bench, the NCCL collective and redistribute benchmarks,
# fully_shard's step on one rank and what its prefetching hides on two; in
# that order: the gpu-labelled suites, the benchmarks, then the CPU suites
# (which CI runs too) last (design.md section 6 measures
# redistribute overhead on one H100 rank; several ranks sharing the GPU talk
# over sockets and are for correctness only). With --build-only it stops after
# the build: a cold build and the tests may not fit one 10-minute device call,
# and the second call finds the build done if the machine is still warm.
# Logs go to build-gpu/gpu-logs; when $OUT is set (the run tool brings back at
# most 8 files from it) they are also packed into $OUT/gpu-logs.tar.gz after
# every step, so a call cut off by its time limit still brings back the steps
# that finished. Ends with a short summary; exits non-zero when a step failed.
#
# Abseil comes from .deps/absl, made on the build machine by
# scripts/fetch_gpu_deps.sh and carried along:
#
#   run(command="bash scripts/gpu_check.sh --build-only", carry=[".deps/absl"])
#   run(command="bash scripts/gpu_check.sh --bench", carry=[".deps/absl"])   # at once after
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${repo_root}"

run_bench=0
build_only=0
for arg in "$@"; do
  case "${arg}" in
    --bench) run_bench=1 ;;
    --build-only) build_only=1 ;;
    *) echo "gpu_check: unknown argument ${arg} (expected --bench or --build-only)" >&2; exit 2 ;;
  esac
done

build_dir="${repo_root}/build-gpu"
log_dir="${build_dir}/gpu-logs"
rm -rf "${log_dir}"
mkdir -p "${log_dir}"
jobs="${DTENSOR_GPU_JOBS:-16}"
declare -a summary=()
status=0

step() { echo; echo "==== gpu_check: $*"; }
# Packs the logs into $OUT (when set) through a temporary file, so that a
# call cut off mid-pack still brings back the previous step's archive.
pack_logs() {
  [[ -n "${OUT:-}" ]] || return 0
  if ! { tar -czf "${OUT}/gpu-logs.tar.gz.tmp" -C "${build_dir}" gpu-logs \
         && mv -f "${OUT}/gpu-logs.tar.gz.tmp" "${OUT}/gpu-logs.tar.gz"; }; then
    echo "gpu_check: packing the logs failed" >&2
  fi
  return 0
}
# Runs "$@" with its output in the log $1 (and on the console); records the
# outcome in the summary (also written to summary.txt) instead of stopping,
# so that later steps still run, packs the logs, and returns 1 on failure.
record() {
  local name="$1"; shift
  local log="${log_dir}/${name}.log"
  local start=${SECONDS}
  step "${name}: $*"
  local outcome=0
  if "$@" 2>&1 | tee "${log}"; then
    summary+=("PASS  ${name} ($((SECONDS - start)) s)")
  else
    summary+=("FAIL  ${name} ($((SECONDS - start)) s, log: ${log})")
    status=1
    outcome=1
  fi
  printf '%s\n' "${summary[@]}" > "${log_dir}/summary.txt"
  pack_logs
  return "${outcome}"
}
# shellcheck disable=SC2317  # called through the EXIT trap
print_summary() {
  echo
  echo "==== gpu_check summary ($(date -u +%FT%TZ), logs in ${log_dir})"
  local line
  for line in "${summary[@]}"; do echo "  ${line}"; done
  local log
  for log in "${log_dir}/ctest.log" "${log_dir}/ctest_gpu.log"; do
    [[ -f "${log}" ]] || continue
    grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|\*\*\*" "${log}" \
      | sed 's/^/  /' || true
  done
  echo "  overall: $([[ ${status} == 0 ]] && echo PASS || echo FAIL)"
  { printf '%s\n' "${summary[@]}"; echo "overall: $([[ ${status} == 0 ]] && echo PASS || echo FAIL)"; } \
    > "${log_dir}/summary.txt"
  pack_logs
}
trap print_summary EXIT

step "machine"
nvidia-smi 2>&1 | tee "${log_dir}/nvidia-smi.log" || { echo "gpu_check: nvidia-smi failed"; status=1; }
nproc; free -g | head -2 || true

step "toolchain"
python="/opt/torch/.venv/bin/python3"
[[ -x "${python}" ]] || python="$(command -v python3)"
torch_prefix="$("${python}" -c 'import torch; print(torch.utils.cmake_prefix_path)')"
"${python}" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
  "nccl", torch.cuda.nccl.version() if torch.cuda.is_available() else "n/a",
  "devices", torch.cuda.device_count())' 2>&1 | tee "${log_dir}/torch.log" || true
g++ --version | head -1
cmake --version | head -1
command -v mpirun && mpirun --version 2>&1 | head -1
grep -E "define NCCL_(MAJOR|MINOR|PATCH)" /usr/include/nccl.h 2>/dev/null || echo "no /usr/include/nccl.h"

absl_prefix="${repo_root}/.deps/absl/usr"
if [[ ! -d "${absl_prefix}" ]]; then
  echo "gpu_check: ${absl_prefix} missing: run scripts/fetch_gpu_deps.sh on the build machine" \
       "and carry .deps/absl" >&2
  exit 1
fi
export LD_LIBRARY_PATH="${absl_prefix}/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:${LD_LIBRARY_PATH}}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
cuda_root=""
for candidate in /usr/local/cuda /usr/local/cuda-13.0 /usr/lib/cuda; do
  [[ -d "${candidate}" ]] && { cuda_root="${candidate}"; break; }
done

configure_args=(
  -S "${repo_root}" -B "${build_dir}"
  -DCMAKE_BUILD_TYPE=Release
  -DDTENSOR_WITH_NCCL=ON
  "-DCMAKE_PREFIX_PATH=${torch_prefix};${absl_prefix}"
  -DPython3_EXECUTABLE="${python}"
)
[[ -n "${cuda_root}" ]] && configure_args+=("-DCUDAToolkit_ROOT=${cuda_root}")
# With ninja, a failed file does not stop the others: one call shows every error.
keep_going=()
if command -v ninja >/dev/null; then
  configure_args+=(-G Ninja)
  keep_going=(-- -k 0)
fi

if record configure cmake "${configure_args[@]}" \
   && record build cmake --build "${build_dir}" -j "${jobs}" "${keep_going[@]}"; then
  step "which NCCL the library loads (a CUDA libtorch may bring its own)"
  ldd "${build_dir}/libdtensor.so" 2>&1 | grep -E "nccl|cudart|torch_cuda" \
    | tee "${log_dir}/ldd.log" || true
  [[ ${build_only} == 1 ]] && exit "${status}"
  # The GPU suites verbosely, so the log shows every test that ran on the GPU.
  record ctest_gpu ctest --test-dir "${build_dir}" -V --timeout 900 -L gpu || true
  if [[ ${run_bench} == 1 ]]; then
    for bench in collective_bench redistribute_bench; do
      if [[ -x "${build_dir}/benchmarks/${bench}" ]]; then
        # One rank: DTENSOR_SINGLE_RANK_COLLECTIVES=1 keeps redistribute's
        # collectives (a one-rank group otherwise copies locally).
        record "${bench}_nccl" mpirun -np 1 -x DTENSOR_SINGLE_RANK_COLLECTIVES=1 \
          "${build_dir}/benchmarks/${bench}" --backend=nccl \
          --benchmark_min_time=0.05s "--benchmark_out=${log_dir}/${bench}_nccl.json" \
          --benchmark_out_format=json || true
      else
        summary+=("SKIP  ${bench}_nccl (not built)")
      fi
    done
    # fully_shard's step beside a hand-written ZeRO-3 one: on one rank the
    # overhead above the collectives; on 2 ranks sharing the GPU a check that
    # both train alike on CUDA (exits 1 otherwise), not a timing.
    fsdp_bench="${build_dir}/benchmarks/fsdp_step_bench"
    if [[ -x "${fsdp_bench}" ]]; then
      record fsdp_step_bench_nccl mpirun -np 1 -x DTENSOR_SINGLE_RANK_COLLECTIVES=1 \
        "${fsdp_bench}" --backend=nccl --ranks=1 --steps=20 \
        "--json=${log_dir}/fsdp_step_bench_nccl.json" || true
      record fsdp_step_bench_nccl_2ranks mpirun -np 2 "${fsdp_bench}" --backend=nccl --ranks=2 \
        --size=test --steps=2 || true
      # What prefetching hides: two ranks sharing the GPU (their all-gathers
      # go over host sockets, slower than NVLink: indicative), with the
      # bench's 64 rows per rank and with 32768 (more compute to hide under).
      for rows in 64 32768; do
        record "fsdp_prefetch_nccl_rows${rows}" mpirun -np 2 "${fsdp_bench}" --backend=nccl \
          --ranks=2 --prefetch --rows="${rows}" --steps=10 \
          "--json=${log_dir}/fsdp_prefetch_nccl_rows${rows}.json" || true
      done
    else
      summary+=("SKIP  fsdp_step_bench_nccl (not built)")
    fi
  fi
  # The CPU suites last: CI runs them too; here they check the CUDA build.
  record ctest ctest --test-dir "${build_dir}" --output-on-failure --timeout 900 -j 8 -LE gpu || true
fi
exit "${status}"
