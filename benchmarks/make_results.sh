#!/usr/bin/env bash
# Copyright 2026 The dtensor Authors.
#
# benchmarks/make_results.sh: runs the benchmarks and regenerates
# benchmarks/RESULTS.md and the SVG plots in benchmarks/plots/ from their JSON.
#
#   bash benchmarks/make_results.sh                  # full: every size, >= 0.1 s per cell
#                                                    # (moe_bench, checkpoint_bench: >= 0.5 s)
#   bash benchmarks/make_results.sh --quick          # 3 sizes, >= 0.01 s per cell, 3 training steps
#   bash benchmarks/make_results.sh --build-dir=DIR  # benchmarks already built in DIR (Release)
#   bash benchmarks/make_results.sh --render-only    # no run: redraw from benchmarks/results/
#
# Steps: installs python3-matplotlib (Debian) when missing; configures and builds
# the benchmark targets into build-results/ (Release, warnings as errors)
# unless --build-dir names a build; records the machine (uname, nproc, CPU
# model, memory, libtorch, Open MPI, commit, date, load average, and the file
# system checkpoint_bench writes to) in results/machine.txt; runs every
# registered benchmark (the table `registered` below) on the local backend (4
# threads) and under `mpirun -np 4 --oversubscribe`, each writing
# results/<program>.<backend>.json (and .log; scaling_bench runs 2, 4 and 8
# ranks into results/scaling_bench.<backend>.<ranks>.json), with the command
# lines and their seconds in results/commands.txt (checkpoint_bench writes its
# files in results/checkpoint-files/, on this tree's disk rather than in /tmp,
# which may be a tmpfs; removed afterwards); then make_results.py writes RESULTS.md
# and plots/. benchmarks/results/ is git-ignored; commit RESULTS.md and plots/.
#
# GPU results: unpack the gpu-logs.tar.gz that `scripts/gpu_check.sh --bench`
# leaves in $OUT into benchmarks/results/ (giving results/gpu-logs/). This
# script then copies its NCCL JSON and machine logs into the committed
# benchmarks/nccl/, from which the NCCL section is drawn; without it the
# committed copy is drawn as it is.
#
# Adding a benchmark: a function bench_<program> that runs it on one backend
# (gbench_run for Google Benchmark programs), a line in `registered`, and a
# section in make_results.py's BENCHMARKS.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "${repo_root}"

invocation="benchmarks/make_results.sh $*"
quick=0
render_only=0
build_dir=""
for arg in "$@"; do
  case "${arg}" in
    --quick) quick=1 ;;
    --render-only) render_only=1 ;;
    --build-dir=*) build_dir="${arg#--build-dir=}" ;;
    *) echo "make_results: unknown argument ${arg}" \
            "(expected --quick, --render-only or --build-dir=DIR)" >&2; exit 2 ;;
  esac
done

results=benchmarks/results
ranks=4
python=/usr/bin/python3  # Debian's, where python3-matplotlib lives

# Debian's matplotlib for the plots.
if ! "${python}" -c 'import matplotlib' 2>/dev/null; then
  sudo_cmd=""
  [[ "$(id -u)" == 0 ]] || sudo_cmd="sudo"
  DEBIAN_FRONTEND=noninteractive ${sudo_cmd} apt-get install -y -qq --no-install-recommends \
    python3-matplotlib
fi

# The NCCL run of scripts/gpu_check.sh --bench, when one was unpacked here.
# The GPU machine's copy of the tree has no git: the commit is this tree's.
if [[ -d "${results}/gpu-logs" ]]; then
  for file in collective_bench_nccl.json redistribute_bench_nccl.json nvidia-smi.log torch.log; do
    cp "${results}/gpu-logs/${file}" benchmarks/nccl/
  done
  rm -f benchmarks/nccl/fsdp_prefetch_nccl_rows*.json
  cp "${results}"/gpu-logs/fsdp_prefetch_nccl_rows*.json benchmarks/nccl/
  git rev-parse --short HEAD > benchmarks/nccl/commit.txt
fi

if [[ ${render_only} == 1 ]]; then
  exec "${python}" benchmarks/make_results.py "${results}"
fi

# ---------------------------------------------------------------------------
# Build.

if [[ -z "${build_dir}" ]]; then
  build_dir=build-results
  bash scripts/setup.sh
  cmake -S . -B "${build_dir}" -DCMAKE_BUILD_TYPE=Release -DDTENSOR_WARNINGS_AS_ERRORS=ON \
    -DDTENSOR_BUILD_TESTS=OFF
  cmake --build "${build_dir}" -j "$(nproc)" --target collective_bench redistribute_bench \
    dispatch_bench plan_bench llama_step_bench fsdp_step_bench moe_bench checkpoint_bench \
    scaling_bench
fi
build_type="$(sed -n 's/^CMAKE_BUILD_TYPE:STRING=//p' "${build_dir}/CMakeCache.txt")"
if [[ "${build_type}" != Release ]]; then
  echo "make_results: ${build_dir} is a ${build_type:-default} build; expected Release" >&2
  exit 1
fi

# ---------------------------------------------------------------------------
# The machine.

# checkpoint_bench's directory (DTENSOR_CHECKPOINT_BENCH_DIR), relative to the
# repository root where every command runs.
checkpoint_files="${results}/checkpoint-files"
rm -rf "${results:?}"/*.json "${results:?}"/*.log "${results}/commands.txt" \
  "${results}/machine.txt" "${checkpoint_files}"
mkdir -p "${results}" "${checkpoint_files}"

torch_dir="$(sed -n 's/^Torch_DIR:PATH=//p' "${build_dir}/CMakeCache.txt")"
if owner="$(dpkg -S "${torch_dir}" 2>/dev/null)"; then
  libtorch="$(dpkg-query -W -f='${Package} ${Version}' "${owner%%:*}") (Debian)"
else
  libtorch="$(sed -n 's/.*PACKAGE_VERSION "\(.*\)".*/\1/p' "${torch_dir}/TorchConfigVersion.cmake")"
  libtorch+=" (${torch_dir})"
fi
cxx="$(sed -n 's/^CMAKE_CXX_COMPILER:[A-Z]*=//p' "${build_dir}/CMakeCache.txt")"
commit="$(git rev-parse --short HEAD)"
git diff --quiet HEAD -- || commit+=" with uncommitted changes"
{
  echo "date=$(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "commit=${commit}"
  echo "mode=$([[ ${quick} == 1 ]] && echo quick || echo full)"
  echo "invocation=${invocation}"
  echo "uname=$(uname -srmo)"
  echo "os=$(sed -n 's/^PRETTY_NAME="\(.*\)"/\1/p' /etc/os-release)"
  echo "nproc=$(nproc)"
  echo "cpu=$(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)"
  echo "memory=$(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)"
  echo "compiler=$("${cxx}" --version | head -1)"
  echo "libtorch=${libtorch}"
  echo "mpi=$(mpirun --version 2>&1 | head -1)"
  echo "build=${build_dir} (${build_type})"
  echo "checkpoint_files=${checkpoint_files}"
  echo "checkpoint_fs=$(df --output=fstype,source "${checkpoint_files}" |
    awk 'END {print $1 " on " $2}')"
  echo "load_start=$(cut -d' ' -f1-3 /proc/loadavg)"
} > "${results}/machine.txt"

# ---------------------------------------------------------------------------
# Running the benchmarks.

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1  # as root; harmless otherwise
export DTENSOR_CHECKPOINT_BENCH_DIR="${checkpoint_files}"  # mpirun's ranks inherit it
bin="${build_dir}/benchmarks"
if [[ ${quick} == 1 ]]; then
  size_filter='/(16384|1048576|16777216)/|^plan_cache_hit/'
  gbench_flags=(--benchmark_min_time=0.01)
  long_gbench_flags=("${gbench_flags[@]}")
  train_steps=3  # llama_step_bench, fsdp_step_bench
else
  size_filter='.'
  gbench_flags=(--benchmark_min_time=0.1)
  # moe_bench, checkpoint_bench: their largest sizes take 0.1 to 1 s an
  # iteration, so 0.1 s would time one; about 40 s per program and backend.
  long_gbench_flags=(--benchmark_min_time=0.5)
  train_steps=10
fi

# Runs program $2 on backend $1 (local: ${ranks} threads; mpi: mpirun; one:
# the program as is, it makes its own rank) with the arguments after it; the
# output goes to results/<program>.<backend><run_suffix>.log, the command line
# and its seconds to commands.txt. A caller runs other rank counts by making
# `ranks` and `run_suffix` local (bash locals reach the functions it calls).
run_suffix=""
run_on() {
  local backend="$1" program="$2"
  shift 2
  local command=()
  case "${backend}" in
    local) command=("${bin}/${program}" --backend=local "--ranks=${ranks}") ;;
    mpi) command=(mpirun -np "${ranks}" --oversubscribe "${bin}/${program}" --backend=mpi) ;;
    one) command=("${bin}/${program}") ;;
  esac
  command+=("$@")
  local log="${results}/${program}.${backend}${run_suffix}.log" start=${SECONDS}
  echo "make_results: ${command[*]}"
  if ! "${command[@]}" > "${log}" 2>&1; then
    echo "make_results: ${program} on ${backend} failed; see ${log}" >&2
    tail -20 "${log}" >&2
    exit 1
  fi
  printf '%s\t%s\n' "$((SECONDS - start))" "$(quoted "${command[@]}")" >> "${results}/commands.txt"
}

# The arguments as one line a shell reads back: single quotes where needed.
quoted() {
  local arg words=()
  for arg in "$@"; do
    if [[ "${arg}" =~ [^A-Za-z0-9_./=:,+-] ]]; then words+=("'${arg}'"); else words+=("${arg}"); fi
  done
  echo "${words[*]}"
}

# A Google Benchmark program ($2) on backend $1 with JSON output
# (results/<program>.<backend><run_suffix>.json); more flags after. A bench_
# function may override gbench_flags with a local.
gbench_run() {
  run_on "$1" "$2" "${gbench_flags[@]}" "${@:3}" \
    "--benchmark_out=${results}/$2.$1${run_suffix}.json" --benchmark_out_format=json
}

bench_collective_bench() { gbench_run "$1" collective_bench "--benchmark_filter=${size_filter}"; }
bench_redistribute_bench() {
  gbench_run "$1" redistribute_bench "--benchmark_filter=${size_filter}"
}
bench_dispatch_bench() { gbench_run "$1" dispatch_bench; }
bench_plan_bench() { gbench_run "$1" plan_bench; }
bench_llama_step_bench() {
  run_on "$1" llama_step_bench "--steps=${train_steps}" "--json=${results}/llama_step_bench.$1.json"
}
bench_fsdp_step_bench() {
  run_on "$1" fsdp_step_bench "--steps=${train_steps}" "--json=${results}/fsdp_step_bench.$1.json"
}
bench_moe_bench() {
  local gbench_flags=("${long_gbench_flags[@]}")
  gbench_run "$1" moe_bench "--benchmark_filter=${size_filter}"
}
bench_checkpoint_bench() {
  local gbench_flags=("${long_gbench_flags[@]}")
  gbench_run "$1" checkpoint_bench "--benchmark_filter=${size_filter}"
}
# One run per rank count: results/scaling_bench.<backend>.<ranks>.json. Its
# two sizes (1 and 16 MiB) are quick mode's too; a few minutes in all.
bench_scaling_bench() {
  local ranks run_suffix
  for ranks in 2 4 8; do
    run_suffix=".${ranks}"
    gbench_run "$1" scaling_bench
  done
}

# Registered benchmarks: the program, then the backends it runs on.
registered=(
  "collective_bench local mpi"
  "redistribute_bench local mpi"
  "dispatch_bench one"
  "plan_bench one"
  "llama_step_bench local mpi"
  "fsdp_step_bench local mpi"
  "moe_bench local mpi"
  "checkpoint_bench local mpi"
  "scaling_bench local mpi"
)

for entry in "${registered[@]}"; do
  read -r program backends <<< "${entry}"
  for backend in ${backends}; do "bench_${program}" "${backend}"; done
done
echo "load_end=$(cut -d' ' -f1-3 /proc/loadavg)" >> "${results}/machine.txt"
rm -rf "${checkpoint_files:?}"

"${python}" benchmarks/make_results.py "${results}"
