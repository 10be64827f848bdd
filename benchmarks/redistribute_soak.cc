// Copyright 2026 The dtensor Authors.
//
// benchmarks/redistribute_soak.cc: a soak run of redistribute (issue 19,
// "Reliability under load"). Not a test: it runs many random redistributes on
// the local backend, checks every result exactly, and reports mismatches and
// how memory grows over the run.
//
// Every case draws (the same on every rank, from --seed):
//   * a mesh of 1-3 dims and at most --max-ranks ranks, over the first ranks
//     of the world in order or over the last ones in reverse order (so mesh
//     coordinates and world ranks differ);
//   * a global shape of 1-3 dims, sizes 0-12 (uneven and empty shards, size-0
//     dims), and a dtype: float32, float64, int64 or bfloat16;
//   * source placements of every kind: R, S(d) (negative d too), SS(d,sf),
//     RG(dims,units) (zero units too) and P(op), with one op per case: sum,
//     max or min; targets the same, Partial included.
// A Partial source is built with from_local from per-rank terms (small
// integers, so every dtype holds every partial result exactly); the global
// value is their reduction. A target Partial that the source does not already
// hold is reached through redistribute_any (the internal path autograd uses);
// everything else goes through DTensor::redistribute. Checks, exactly:
// full_tensor of the result equals the global value (for Partial targets this
// is the reduced value); the result's placements are the target's; for
// targets without Partial, each rank's shard equals its slice of the global
// value.
//
// The ranks are threads of one run_ranks world of --max-ranks ranks that
// lives for the whole run (unless --restart-every), so the per-rank caches
// (plans, transitions) live as long as a long-running program's would. Memory
// is sampled at 10%, 50% and 100% of the run: resident set size
// (/proc/self/statm), heap bytes in use (mallinfo2), the idle bytes the buffer
// pool keeps (bounded by buffer_pool_capacity(): DTENSOR_BUFFER_POOL_CAPACITY
// sets it) and the plans cached over all ranks (plan_redistribute's cache,
// bounded per rank by plan_cache_capacity(): DTENSOR_PLAN_CACHE_CAPACITY sets
// it).
//
// Run (from the build directory):
//   nice -n 10 benchmarks/redistribute_soak --iterations=100000 --seed=1
//   benchmarks/redistribute_soak --iterations=20000 --restart-every=1000   # fresh ranks (and
//                                                                          # caches) per 1000
// Flags: --seed=N (default 1), --iterations=N (default 100000), --max-ranks=N (1-8, default 8),
// --restart-every=N (default 0: never), --show=N (failing cases printed in full, default 5).
// Exit status 1 when a case mismatched or threw.
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <dtensor/base/buffer_pool.h>
#include <dtensor/base/check.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/layout.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/planner.h>

namespace dtensor::soak {
namespace {

using Shape = std::vector<int64_t>;
using Placements = std::vector<PlacementPtr>;

struct Flags {
  uint32_t seed = 1;
  int64_t iterations = 100000;
  int max_ranks = 8;
  int64_t restart_every = 0;
  int64_t show = 5;
};

int64_t parse_integer(std::string_view flag, std::string_view value) {
  const std::string text(value);
  char* end = nullptr;
  const long long parsed = std::strtoll(text.c_str(), &end, 10);
  DTENSOR_CHECK(!text.empty() && *end == '\0' && parsed >= 0, "redistribute_soak: ", flag,
                ": expected a whole number, found \"", value, "\"");
  return parsed;
}

Flags parse_flags(int argc, char** argv) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    const size_t eq = arg.find('=');
    const std::string_view name = arg.substr(0, eq);
    DTENSOR_CHECK(eq != std::string_view::npos, "redistribute_soak: expected --flag=value, found ",
                  arg);
    const int64_t value = parse_integer(name, arg.substr(eq + 1));
    if (name == "--seed") {
      flags.seed = static_cast<uint32_t>(value);
    } else if (name == "--iterations") {
      flags.iterations = value;
    } else if (name == "--max-ranks") {
      flags.max_ranks = static_cast<int>(value);
    } else if (name == "--restart-every") {
      flags.restart_every = value;
    } else if (name == "--show") {
      flags.show = value;
    } else {
      DTENSOR_CHECK(false, "redistribute_soak: unknown flag ", name,
                    " (known: --seed --iterations --max-ranks --restart-every --show)");
    }
  }
  DTENSOR_CHECK(flags.max_ranks >= 1 && flags.max_ranks <= 8,
                "redistribute_soak: --max-ranks: expected 1 to 8, found ", flags.max_ranks);
  return flags;
}

// ---------------------------------------------------------------------------
// Cases.

std::string join(const Shape& values) {
  std::string out;
  for (size_t i = 0; i < values.size(); ++i) out += (i ? "," : "") + std::to_string(values[i]);
  return out;
}

struct Case {
  int64_t index = 0;
  Shape mesh_shape;
  bool reversed_ranks = false;  // the mesh's ranks: the last ones, in reverse order
  Shape shape;
  c10::ScalarType dtype = at::kFloat;
  ReduceOp op = ReduceOp::kSum;  // of every Partial in the case
  Placements source;             // normalized
  Placements target;             // normalized

  std::string describe() const {
    std::ostringstream out;
    out << "case " << index << ": mesh (" << join(mesh_shape) << ")"
        << (reversed_ranks ? " on the last ranks reversed" : "") << ", shape [" << join(shape)
        << "], " << c10::toString(dtype) << ", " << placements_to_string(source) << " -> "
        << placements_to_string(target);
    return out.str();
  }
};

int64_t uniform(std::mt19937& rng, int64_t lo, int64_t hi) {
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

Shape random_mesh_shape(std::mt19937& rng, int max_ranks) {
  while (true) {
    Shape mesh(uniform(rng, 1, 3));
    int64_t ranks = 1;
    for (int64_t& n : mesh) {
      n = uniform(rng, 1, max_ranks);
      ranks *= n;
    }
    if (ranks <= max_ranks) return mesh;
  }
}

PlacementPtr random_ragged(std::mt19937& rng, int64_t n, int64_t ndim) {
  std::vector<int64_t> units(n, 0);
  while (std::all_of(units.begin(), units.end(), [](int64_t u) { return u == 0; })) {
    for (int64_t& u : units) u = uniform(rng, 0, 3);
  }
  // Mostly one leading dim, sometimes several merged into rows.
  const int64_t dims = (ndim >= 2 && uniform(rng, 0, 3) == 0) ? uniform(rng, 2, ndim) : 1;
  return Ragged::make(dims, units);
}

// One mesh dim's placement (of `n` ranks) for a tensor of `ndim` dims.
PlacementPtr random_placement(std::mt19937& rng, int64_t n, int64_t ndim, ReduceOp op) {
  switch (uniform(rng, 0, 5)) {
    case 0:
      return Replicate::make();
    case 1:
    case 2:
      return Shard::make(uniform(rng, -ndim, ndim - 1));
    case 3:
      return StridedShard::make(uniform(rng, 0, ndim - 1), uniform(rng, 1, 3));
    case 4:
      return random_ragged(rng, n, ndim);
    default:
      return Partial::make(op);
  }
}

// Random placements until they are valid for the shape (normalized), e.g.
// Ragged placements that merge the same number of dims.
Placements random_placements(std::mt19937& rng, const Shape& mesh_shape, int64_t ndim,
                             ReduceOp op) {
  while (true) {
    Placements placements;
    for (int64_t n : mesh_shape) placements.push_back(random_placement(rng, n, ndim, op));
    try {
      return normalize_placements(placements, ndim, mesh_shape);
    } catch (const Error&) {
    }
  }
}

Case random_case(std::mt19937& rng, int64_t index, int max_ranks) {
  static constexpr std::array<c10::ScalarType, 4> kDtypes = {at::kFloat, at::kDouble, at::kLong,
                                                             at::kBFloat16};
  static constexpr std::array<ReduceOp, 4> kOps = {ReduceOp::kSum, ReduceOp::kSum, ReduceOp::kMax,
                                                   ReduceOp::kMin};
  Case c;
  c.index = index;
  c.mesh_shape = random_mesh_shape(rng, max_ranks);
  c.reversed_ranks = uniform(rng, 0, 1) == 1;
  c.shape.resize(uniform(rng, 1, 3));
  for (int64_t& s : c.shape) s = uniform(rng, 0, 12);
  c.dtype = kDtypes[uniform(rng, 0, kDtypes.size() - 1)];
  c.op = kOps[uniform(rng, 0, kOps.size() - 1)];
  const int64_t ndim = static_cast<int64_t>(c.shape.size());
  c.source = random_placements(rng, c.mesh_shape, ndim, c.op);
  c.target = random_placements(rng, c.mesh_shape, ndim, c.op);
  return c;
}

// ---------------------------------------------------------------------------
// Values.

// The terms of `c`'s source: one global-shaped tensor per coordinate over the
// source's Partial mesh dims (row-major); their reduction is the global value.
// Small integers, so sums over 8 ranks stay exact in bfloat16.
at::Tensor make_terms(const Case& c, uint32_t seed) {
  int64_t count = 1;
  for (size_t m = 0; m < c.mesh_shape.size(); ++m) {
    if (c.source[m]->partial_op()) count *= c.mesh_shape[m];
  }
  Shape shape = {count};
  shape.insert(shape.end(), c.shape.begin(), c.shape.end());
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(seed * 1000003ull + c.index);
  const int64_t bound = c.op == ReduceOp::kSum ? 4 : 50;
  return at::randint(-bound, bound + 1, shape, generator, at::kLong).to(c.dtype);
}

at::Tensor reduce_terms(const at::Tensor& terms, ReduceOp op) {
  switch (op) {
    case ReduceOp::kSum:
      return terms.sum(0, /*keepdim=*/false, terms.scalar_type());
    case ReduceOp::kMax:
      return std::get<0>(terms.max(0));
    default:
      return std::get<0>(terms.min(0));
  }
}

// The part of `global` the rank at `coordinate` holds under `placements`
// (Partial mesh dims hold all of it).
at::Tensor slice_for(const at::Tensor& global, const Shape& mesh_shape, const Shape& coordinate,
                     const Placements& placements) {
  const LocalLayout layout =
      compute_local_layout(global.sizes().vec(), mesh_shape, coordinate, placements);
  at::Tensor t = global;
  if (layout.merged_leading_dims > 1) t = t.flatten(0, layout.merged_leading_dims - 1);
  for (size_t d = 0; d < layout.global_indices().size(); ++d) {
    t = t.index_select(static_cast<int64_t>(d), at::tensor(layout.global_indices()[d], at::kLong));
  }
  return t.contiguous();
}

// Which term the rank at `coordinate` holds: its row-major position over the
// Partial mesh dims.
int64_t term_index(const Case& c, const Shape& coordinate) {
  int64_t index = 0;
  for (size_t m = 0; m < c.mesh_shape.size(); ++m) {
    if (c.source[m]->partial_op()) index = index * c.mesh_shape[m] + coordinate[m];
  }
  return index;
}

bool has_partial(const Placements& placements) {
  return std::any_of(placements.begin(), placements.end(),
                     [](const PlacementPtr& p) { return p->partial_op().has_value(); });
}

// Whether the public redistribute accepts `c`: every target Partial is
// already the source's on that mesh dim.
bool public_redistribute_accepts(const Case& c) {
  for (size_t m = 0; m < c.target.size(); ++m) {
    if (c.target[m]->partial_op() && *c.target[m] != *c.source[m]) return false;
  }
  return true;
}

// The source DTensor of `c` from the calling rank's `local` term.
DTensor make_source(const Case& c, const DeviceMesh& mesh, const at::Tensor& local) {
  FromLocalOptions options;
  options.shape = c.shape;
  return from_local(local, mesh, c.source, options);
}

// "[2, 3] {1, 2, 3, 4, 5, 6}": a tensor's shape and values on one line (every
// value the soak makes is a small integer).
std::string values(const at::Tensor& t) {
  std::ostringstream out;
  out << t.sizes() << " {";
  const at::Tensor flat = t.to(at::kLong).flatten().contiguous();
  for (int64_t i = 0; i < flat.numel(); ++i) {
    out << (i ? ", " : "") << flat.data_ptr<int64_t>()[i];
  }
  out << "}";
  return out.str();
}

// Runs `c` on the calling rank (in the mesh); returns what is wrong, or "".
std::string run_case(const Case& c, const DeviceMesh& mesh, uint32_t seed) {
  const at::Tensor terms = make_terms(c, seed);
  const at::Tensor global = reduce_terms(terms, c.op);
  const Shape& coordinate = mesh.coordinate();
  const at::Tensor local =
      slice_for(terms[term_index(c, coordinate)], c.mesh_shape, coordinate, c.source);
  const DTensor source = make_source(c, mesh, local);
  const DTensor result = public_redistribute_accepts(c) ? source.redistribute(c.target)
                                                        : redistribute_any(source, c.target);
  std::ostringstream problem;
  if (!same_placements(result.placements(), c.target)) {
    problem << "  placements " << placements_to_string(result.placements());
  }
  if (!has_partial(c.target)) {
    const at::Tensor expected = slice_for(global, c.mesh_shape, coordinate, c.target);
    const at::Tensor got = result.to_local();
    if (!at::equal(got, expected)) {
      problem << "  local " << values(got) << ", expected " << values(expected);
    }
  }
  const at::Tensor full = result.full_tensor();
  if (!at::equal(full, global)) {
    problem << "  full_tensor " << values(full) << ", expected " << values(global);
  }
  return problem.str();
}

// ---------------------------------------------------------------------------
// The run.

struct MemorySample {
  int64_t done = 0;
  double rss_mib = 0;
  double heap_mib = 0;
  double pool_mib = 0;            // idle blocks of the buffer pool
  std::atomic<int64_t> plans{0};  // over all ranks
};

double rss_mib() {
  std::ifstream statm("/proc/self/statm");
  int64_t pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double heap_in_use_mib() { return static_cast<double>(mallinfo2().uordblks) / (1 << 20); }

// What the ranks share: counts, the failing cases, memory samples.
class Report {
 public:
  // Where memory is sampled, in percent of the run.
  static constexpr std::array<int64_t, 3> kPercents = {10, 50, 100};

  explicit Report(const Flags& flags) : flags_(flags) {
    for (int64_t percent : kPercents) {
      checkpoints_.push_back(std::max<int64_t>(1, flags.iterations * percent / 100));
    }
  }

  const std::vector<int64_t>& checkpoints() const { return checkpoints_; }

  void fail(const Case& c, int world_rank, const std::string& what) {
    std::lock_guard<std::mutex> lock(mutex_);
    std::string& entry = failures_[c.index];
    if (entry.empty()) entry = c.describe() + "\n";
    entry += "    world rank " + std::to_string(world_rank) + ":" + what + "\n";
  }

  int64_t failed_cases() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<int64_t>(failures_.size());
  }

  // Every rank calls it at checkpoint `i`; world rank 0 also samples memory.
  void sample(size_t i, int world_rank, int64_t done) {
    samples_[i].plans += plan_cache_size();
    if (world_rank != 0) return;
    samples_[i].done = done;
    samples_[i].rss_mib = rss_mib();
    samples_[i].heap_mib = heap_in_use_mib();
    samples_[i].pool_mib = static_cast<double>(buffer_pool_stats().cached_bytes) / (1 << 20);
  }

  void note_case(const Case& c) { public_cases_ += public_redistribute_accepts(c) ? 1 : 0; }

  int print(double seconds) const {
    std::cout << std::fixed << std::setprecision(1) << "ran for " << seconds << " s\n";
    for (size_t i = 0; i < checkpoints_.size(); ++i) {
      const MemorySample& s = samples_[i];
      std::cout << "  " << std::setw(3) << kPercents[i] << "%: " << s.done << " cases, rss "
                << s.rss_mib << " MiB, heap in use " << s.heap_mib << " MiB, buffer pool "
                << s.pool_mib << " MiB, plans cached (all ranks) " << s.plans.load() << " (at most "
                << plan_cache_capacity() << " per rank)\n";
    }
    std::cout << "memory 10% -> 100%: rss " << std::showpos
              << samples_[2].rss_mib - samples_[0].rss_mib << " MiB, heap "
              << samples_[2].heap_mib - samples_[0].heap_mib << " MiB" << std::noshowpos << "\n";
    const int64_t failed = failed_cases();
    std::cout << "checked " << flags_.iterations << " redistributes (" << public_cases_.load()
              << " through DTensor::redistribute, the rest to a new Partial through "
              << "redistribute_any), every source from from_local: " << failed
              << " mismatched or threw\n";
    int64_t shown = 0;
    for (const auto& [index, text] : failures_) {
      if (shown++ == flags_.show) break;
      std::cout << "  " << text;
    }
    return failed == 0 ? 0 : 1;
  }

 private:
  const Flags& flags_;
  std::vector<int64_t> checkpoints_;
  std::array<MemorySample, 3> samples_;
  std::atomic<int64_t> public_cases_{0};
  mutable std::mutex mutex_;
  std::map<int64_t, std::string> failures_;
};

// The meshes of one world, built on first use (collectively: every world rank
// draws the same cases, so all of them get here in the same order).
class Meshes {
 public:
  explicit Meshes(int world_size) : world_size_(world_size) {}

  const DeviceMesh& get(const Case& c) {
    auto key = std::make_pair(c.mesh_shape, c.reversed_ranks);
    auto it = meshes_.find(key);
    if (it != meshes_.end()) return it->second;
    int64_t size = 1;
    for (int64_t n : c.mesh_shape) size *= n;
    std::vector<int64_t> ranks(size);
    for (int64_t i = 0; i < size; ++i) ranks[i] = c.reversed_ranks ? world_size_ - 1 - i : i;
    return meshes_.emplace(key, DeviceMesh(local_world(), c.mesh_shape, {}, ranks)).first->second;
  }

 private:
  int world_size_;
  std::map<std::pair<Shape, bool>, DeviceMesh> meshes_;
};

// Stop early when the world itself has failed (every later case would throw).
constexpr int64_t kMaxFailedCases = 100;

// Cases [begin, end) on the calling rank of a world of flags.max_ranks.
void run_cases(const Flags& flags, int world_rank, int64_t begin, int64_t end, Report& report) {
  std::mt19937 rng(flags.seed);
  Meshes meshes(flags.max_ranks);
  size_t next_checkpoint = 0;
  while (next_checkpoint < report.checkpoints().size() &&
         report.checkpoints()[next_checkpoint] <= begin) {
    ++next_checkpoint;
  }
  // Every world draws from the start, so a case is the same whatever
  // --restart-every is.
  for (int64_t i = 0; i < end; ++i) {
    const Case c = random_case(rng, i, flags.max_ranks);
    if (i < begin) continue;
    const DeviceMesh& mesh = meshes.get(c);
    if (mesh.contains_calling_rank()) {
      if (grid_position(mesh.coordinate(), c.mesh_shape) == 0) report.note_case(c);
      std::string problem;
      try {
        problem = run_case(c, mesh, flags.seed);
      } catch (const std::exception& e) {
        problem = std::string("  threw: ") + e.what();
      }
      if (!problem.empty()) report.fail(c, world_rank, problem);
    }
    while (next_checkpoint < report.checkpoints().size() &&
           i + 1 == report.checkpoints()[next_checkpoint]) {
      report.sample(next_checkpoint++, world_rank, i + 1);
    }
    if (report.failed_cases() >= kMaxFailedCases) break;
  }
}

int soak_main(int argc, char** argv) {
  const Flags flags = parse_flags(argc, argv);
  std::cout << "redistribute_soak: seed " << flags.seed << ", " << flags.iterations
            << " random redistributes, meshes of up to " << flags.max_ranks
            << " ranks and 3 dims on the local backend"
            << (flags.restart_every > 0
                    ? ", fresh ranks every " + std::to_string(flags.restart_every) + " cases"
                    : "")
            << std::endl;
  Report report(flags);
  const auto start = std::chrono::steady_clock::now();
  const int64_t batch = flags.restart_every > 0 ? flags.restart_every : flags.iterations;
  for (int64_t begin = 0; begin < flags.iterations && report.failed_cases() < kMaxFailedCases;
       begin += batch) {
    const int64_t end = std::min(flags.iterations, begin + batch);
    run_ranks(flags.max_ranks,
              [&](int world_rank) { run_cases(flags, world_rank, begin, end, report); });
  }
  return report.print(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
}

}  // namespace
}  // namespace dtensor::soak

int main(int argc, char** argv) {
  try {
    return dtensor::soak::soak_main(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}
