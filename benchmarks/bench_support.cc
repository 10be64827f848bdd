// Copyright 2026 The dtensor Authors.
//
// benchmarks/bench_support.cc: see bench_support.h.
#include "benchmarks/bench_support.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <fstream>
#include <functional>
#include <ostream>
#include <sstream>
#include <string>
#include <utility>

#include <benchmark/benchmark.h>
#include <mpi.h>

#if DTENSOR_HAVE_NCCL
#include <cuda_runtime_api.h>
#endif

#include <dtensor/base/check.h>
#include <dtensor/mesh/local_communicator.h>

namespace dtensor::bench {

// ---------------------------------------------------------------------------
// Ranks.

RankContext make_context(std::shared_ptr<Communicator> comm, bool every_rank_decides,
                         std::string program) {
  at::TensorOptions options = at::TensorOptions().dtype(at::kFloat).device(comm->device());
  return RankContext{std::move(comm), options, every_rank_decides, std::move(program)};
}

void synchronize_device(const RankContext& ctx) {
#if DTENSOR_HAVE_NCCL
  if (ctx.options.device().is_cuda()) {
    const cudaError_t status = cudaDeviceSynchronize();
    DTENSOR_CHECK(status == cudaSuccess, ctx.program, ": cudaDeviceSynchronize: expected ",
                  "success, found ", cudaGetErrorString(status));
  }
#else
  static_cast<void>(ctx);  // no device to wait for
#endif
}

double max_over_ranks(const RankContext& ctx, double value) {
  at::Tensor t = at::full({1}, value, ctx.options.dtype(at::kDouble));
  ctx.comm->all_reduce(t, ReduceOp::kMax);
  return t.item<double>();
}

void check_one_host(const RankContext& ctx) {
  std::ifstream file("/proc/sys/kernel/random/boot_id");
  std::string boot_id;
  std::getline(file, boot_id);
  // Exact in a double: 2^52 values are plenty to tell hosts apart.
  const double mine =
      static_cast<double>(std::hash<std::string>{}(boot_id) & ((uint64_t{1} << 52) - 1));
  DTENSOR_CHECK(max_over_ranks(ctx, mine) == -max_over_ranks(ctx, -mine), ctx.program,
                ": expected every rank on one host (its timings compare clock readings across "
                "ranks), found ranks on different hosts");
}

// ---------------------------------------------------------------------------
// Raw collectives.

namespace {

// `total` split in proportion 1 : 2 : ... : n, summing exactly to `total`.
std::vector<int64_t> uneven_counts(int64_t total, int n) {
  const int64_t weight_sum = int64_t{n} * (n + 1) / 2;
  std::vector<int64_t> counts(n);
  int64_t assigned = 0;
  for (int r = 0; r + 1 < n; ++r) {
    counts[r] = total * (r + 1) / weight_sum;
    assigned += counts[r];
  }
  counts[n - 1] = total - assigned;
  return counts;
}

using Options = at::TensorOptions;

Buffers prepare_in_place(const Communicator& /*c*/, const Options& o, int64_t numel) {
  return Buffers{zeros(o, numel), {}, {}, {}};
}
Buffers prepare_gather(const Communicator& c, const Options& o, int64_t numel) {
  return Buffers{zeros(o, numel / c.size()), zeros(o, numel), {}, {}};
}
Buffers prepare_gather_v(const Communicator& c, const Options& o, int64_t numel) {
  std::vector<int64_t> counts = uneven_counts(numel, c.size());
  return Buffers{zeros(o, counts[c.rank()]), zeros(o, numel), counts, {}};
}
Buffers prepare_scatter(const Communicator& c, const Options& o, int64_t numel) {
  return Buffers{zeros(o, numel), zeros(o, numel / c.size()), {}, {}};
}
Buffers prepare_scatter_v(const Communicator& c, const Options& o, int64_t numel) {
  std::vector<int64_t> counts = uneven_counts(numel, c.size());
  return Buffers{zeros(o, numel), zeros(o, counts[c.rank()]), counts, {}};
}
Buffers prepare_all_to_all(const Communicator& /*c*/, const Options& o, int64_t numel) {
  return Buffers{zeros(o, numel), zeros(o, numel), {}, {}};
}
// Rank q sends rank p weights[(p - q) mod n] rows: uneven pairs, yet every
// rank still sends and receives `numel` in total, as in all_to_all.
Buffers prepare_all_to_all_v(const Communicator& c, const Options& o, int64_t numel) {
  const int n = c.size();
  const int me = c.rank();
  const std::vector<int64_t> weights = uneven_counts(numel, n);
  std::vector<int64_t> send(n), recv(n);
  for (int p = 0; p < n; ++p) {
    send[p] = weights[(p - me + n) % n];
    recv[p] = weights[(me - p + n) % n];
  }
  return Buffers{zeros(o, numel), zeros(o, numel), std::move(send), std::move(recv)};
}

void run_all_reduce(Communicator& c, Buffers& b) { c.all_reduce(b.input, ReduceOp::kSum); }
void run_all_gather(Communicator& c, Buffers& b) { c.all_gather(b.input, b.output); }
void run_all_gather_v(Communicator& c, Buffers& b) { c.all_gather_v(b.input, b.output, b.counts); }
void run_reduce_scatter(Communicator& c, Buffers& b) {
  c.reduce_scatter(b.input, b.output, ReduceOp::kSum);
}
void run_reduce_scatter_v(Communicator& c, Buffers& b) {
  c.reduce_scatter_v(b.input, b.output, b.counts, ReduceOp::kSum);
}
void run_all_to_all(Communicator& c, Buffers& b) { c.all_to_all(b.input, b.output); }
void run_all_to_all_v(Communicator& c, Buffers& b) {
  c.all_to_all_v(b.input, b.counts, b.output, b.recv_counts);
}
void run_broadcast(Communicator& c, Buffers& b) { c.broadcast(b.input, /*root=*/0); }

at::Tensor run_all_reduce_allocating(Communicator& c, Buffers& b) {
  at::Tensor output = at::empty_like(b.input);
  c.all_reduce(b.input, output, ReduceOp::kSum);
  return output;
}
at::Tensor run_broadcast_in_place(Communicator& c, Buffers& b) {
  run_broadcast(c, b);
  return b.input;
}
template <void (*Run)(Communicator&, Buffers&)>
at::Tensor run_into_new_output(Communicator& c, Buffers& b) {
  Buffers fresh{b.input, at::empty_like(b.output), b.counts, b.recv_counts};
  Run(c, fresh);
  return fresh.output;
}

}  // namespace

double all_reduce_factor(int n) { return 2.0 * (n - 1) / n; }
double gather_scatter_factor(int n) { return static_cast<double>(n - 1) / n; }
double broadcast_factor(int) { return 1.0; }

const std::vector<Collective>& collectives() {
  static const std::vector<Collective> table = {
      {"all_reduce", prepare_in_place, run_all_reduce, run_all_reduce_allocating,
       all_reduce_factor},
      {"all_gather", prepare_gather, run_all_gather, run_into_new_output<run_all_gather>,
       gather_scatter_factor},
      {"all_gather_v", prepare_gather_v, run_all_gather_v, run_into_new_output<run_all_gather_v>,
       gather_scatter_factor},
      {"reduce_scatter", prepare_scatter, run_reduce_scatter,
       run_into_new_output<run_reduce_scatter>, gather_scatter_factor},
      {"reduce_scatter_v", prepare_scatter_v, run_reduce_scatter_v,
       run_into_new_output<run_reduce_scatter_v>, gather_scatter_factor},
      {"all_to_all", prepare_all_to_all, run_all_to_all, run_into_new_output<run_all_to_all>,
       gather_scatter_factor},
      {"all_to_all_v", prepare_all_to_all_v, run_all_to_all_v,
       run_into_new_output<run_all_to_all_v>, gather_scatter_factor},
      {"broadcast", prepare_in_place, run_broadcast, run_broadcast_in_place, broadcast_factor},
  };
  return table;
}

const Collective& find_collective(std::string_view name) {
  for (const Collective& c : collectives()) {
    if (name == c.name) return c;
  }
  DTENSOR_CHECK(false, "bench: no raw collective called \"", name, "\"");
  std::abort();  // unreachable
}

at::Tensor zeros(const at::TensorOptions& options, int64_t numel) {
  return at::zeros({numel}, options);
}

int64_t numel_for(int64_t bytes, int n) {
  return bytes / static_cast<int64_t>(sizeof(float)) / n * n;
}

// ---------------------------------------------------------------------------
// Commands.

std::string BenchRank::text(const Command& command) const {
  return command.id == Command::kQuit ? std::string("quit") : describe(command);
}

Command BenchRank::share(std::optional<Command> own) const {
  const Command mine = own.value_or(Command{});
  at::Tensor wire =
      at::tensor({mine.id, mine.bytes, mine.iterations}, at::kLong).to(ctx_.options.device());
  ctx_.comm->broadcast(wire, /*root=*/0);
  wire = wire.cpu();
  const Command root{wire[0].item<int64_t>(), wire[1].item<int64_t>(), wire[2].item<int64_t>()};
  if (ctx_.every_rank_decides) {
    at::Tensor disagree = at::full({1}, root != mine ? 1 : 0, ctx_.options.dtype(at::kLong));
    ctx_.comm->all_reduce(disagree, ReduceOp::kMax);
    DTENSOR_CHECK(disagree.item<int64_t>() == 0, ctx_.program, ": ranks disagree on the next ",
                  "run: rank 0 decided ", text(root), "; this rank (", rank_of(ctx_), ") decided ",
                  text(mine));
  }
  return root;
}

void BenchRank::follow_commands() {
  for (;;) {
    const Command command = share(std::nullopt);
    if (command.id == Command::kQuit) return;
    follow(command);
  }
}

// ---------------------------------------------------------------------------
// Google Benchmark and the command line.

namespace {

// Prints nothing: ranks other than 0 under mpirun run the same benchmarks
// but must stay silent. Its stream swallows --benchmark_list_tests too.
class SilentReporter : public benchmark::BenchmarkReporter {
 public:
  SilentReporter() {
    SetOutputStream(&sink_);
    SetErrorStream(&sink_);
  }
  bool ReportContext(const Context&) override { return true; }
  void ReportRuns(const std::vector<Run>&) override {}

 private:
  std::ostream sink_{nullptr};  // no buffer: every write is dropped
};

struct CommandLine {
  std::string backend = "local";
  int ranks = 4;  // local only; mpirun decides for the others
};

// Removes argv[i] for which `take` returns true, keeping argv[argc] == nullptr.
template <typename Take>
void remove_args(int& argc, char** argv, Take take) {
  int kept = 1;
  for (int i = 1; i < argc; ++i) {
    if (!take(std::string_view(argv[i]))) argv[kept++] = argv[i];
  }
  argc = kept;
  argv[argc] = nullptr;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

// Parses and strips our flags so Google Benchmark sees only its own.
CommandLine take_options(int& argc, char** argv, const BenchProgram& program) {
  CommandLine options;
  remove_args(argc, argv, [&](std::string_view arg) {
    if (starts_with(arg, "--backend=")) {
      options.backend = std::string(arg.substr(std::strlen("--backend=")));
      return true;
    }
    if (starts_with(arg, "--ranks=")) {
      const std::string value(arg.substr(std::strlen("--ranks=")));
      char* end = nullptr;
      const long ranks = std::strtol(value.c_str(), &end, 10);
      DTENSOR_CHECK(!value.empty() && *end == '\0' && ranks >= 1 && ranks <= 1024, program.name,
                    ": --ranks: expected a whole number in [1, 1024], found \"", value, "\"");
      options.ranks = static_cast<int>(ranks);
      return true;
    }
    return false;
  });
  return options;
}

// Initializes Google Benchmark; false when argv holds flags nobody knows.
bool initialize_benchmark(int& argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  return !benchmark::ReportUnrecognizedArguments(argc, argv);
}

// A filter that matches nothing fails the run (Google Benchmark only prints
// a message), so a smoke test whose filter went stale cannot pass silently.
int exit_status(size_t benchmarks_matched) { return benchmarks_matched == 0 ? 1 : 0; }

int run_local(const BenchProgram& program, const CommandLine& options, int argc, char** argv) {
  if (!initialize_benchmark(argc, argv)) return 1;
  size_t matched = 0;
  run_ranks(options.ranks, [&](int rank) {
    const RankContext ctx = make_context(local_world(), /*every_rank_decides=*/false, program.name);
    const std::unique_ptr<BenchRank> me = program.make_rank(ctx);
    if (rank != 0) return me->follow_commands();
    me->register_benchmarks();
    matched = benchmark::RunSpecifiedBenchmarks();
    me->announce(Command{});  // quit: releases ranks 1..n-1
  });
  return exit_status(matched);
}

// mpi and nccl: one process per rank, all running Google Benchmark.
int run_spmd(const BenchProgram& program, const CommandLine& options, int argc, char** argv) {
  const RankContext ctx = make_context(make_world_communicator(options.backend),
                                       /*every_rank_decides=*/true, program.name);
  const bool prints = rank_of(ctx) == 0;
  // Only rank 0 writes --benchmark_out; Google Benchmark would open the file
  // on every rank otherwise.
  if (!prints) {
    remove_args(argc, argv,
                [](std::string_view arg) { return starts_with(arg, "--benchmark_out"); });
  }
  if (!initialize_benchmark(argc, argv)) return 1;
  const std::unique_ptr<BenchRank> me = program.make_rank(ctx);
  me->register_benchmarks();
  size_t matched = 0;
  if (prints) {
    matched = benchmark::RunSpecifiedBenchmarks();
  } else {
    SilentReporter silent;
    matched = benchmark::RunSpecifiedBenchmarks(&silent);
  }
  // Every rank leaves the last collective before any tears MPI down.
  ctx.comm->barrier();
  return exit_status(matched);
}

int run_main(int argc, char** argv, const BenchProgram& program) {
  const CommandLine options = take_options(argc, argv, program);
  const int status = options.backend == "local" ? run_local(program, options, argc, argv)
                                                : run_spmd(program, options, argc, argv);
  benchmark::Shutdown();
  return status;
}

}  // namespace

int bench_main(int argc, char** argv, const BenchProgram& program) {
  try {
    return run_main(argc, argv, program);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: %s\n", program.name, e.what());
    // Under mpirun a rank that fails alone would leave the others waiting in
    // a collective: take the whole job down.
    int initialized = 0;
    int finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (initialized && !finalized) MPI_Abort(MPI_COMM_WORLD, 1);
    return 1;
  }
}

std::string plan_text(const RedistributePlan& plan) {
  std::string text;
  for (const PlannedStep& step : plan.steps) {
    if (!text.empty()) text += " + ";
    text += "d";
    for (size_t i = 0; i < step.mesh_dims.size(); ++i) {
      text += (i ? "," : "") + std::to_string(step.mesh_dims[i]);
    }
    text += ":" + std::string(step.transition->collective());
  }
  return text.empty() ? "no step" : text;
}

std::string counts_text(const Counts& counts, bool as_kib) {
  std::string text;
  for (const auto& [kind, value] : counts) {
    char piece[96];
    if (as_kib) {
      std::snprintf(piece, sizeof(piece), "%s%s %.1f", text.empty() ? "" : ", ", kind.c_str(),
                    value / 1024.0);
    } else {
      std::snprintf(piece, sizeof(piece), "%s%lld %s", text.empty() ? "" : ", ",
                    static_cast<long long>(value), kind.c_str());
    }
    text += piece;
  }
  return text.empty() ? "none" : text;
}

int64_t total(const Counts& counts) {
  int64_t sum = 0;
  for (const auto& [kind, value] : counts) sum += value;
  return sum;
}

JsonObject& JsonObject::member(const std::string& key, const std::string& value) {
  members_ += (members_.empty() ? "\"" : ", \"") + key + "\": " + value;
  return *this;
}

JsonObject& JsonObject::string(const std::string& key, std::string_view value) {
  std::string quoted = "\"";
  for (const char c : value) {
    if (c == '"' || c == '\\') quoted += '\\';
    quoted += c;
  }
  return member(key, quoted + "\"");
}

JsonObject& JsonObject::number(const std::string& key, double value) {
  DTENSOR_CHECK(std::isfinite(value), "JsonObject: ", key, ": expected a finite number, found ",
                value);
  char text[32];
  std::snprintf(text, sizeof(text), "%.9g", value);
  return member(key, text);
}

JsonObject& JsonObject::integer(const std::string& key, int64_t value) {
  return member(key, std::to_string(value));
}

JsonObject& JsonObject::boolean(const std::string& key, bool value) {
  return member(key, value ? "true" : "false");
}

JsonObject& JsonObject::counts(const std::string& key, const Counts& value) {
  JsonObject object;
  for (const auto& [kind, count] : value) object.integer(kind, count);
  return member(key, object.text());
}

std::string JsonObject::text() const { return "{" + members_ + "}"; }

void write_json(const std::string& path, std::string_view program, const JsonObject& context,
                const std::vector<JsonObject>& rows) {
  std::ofstream out(path);
  DTENSOR_CHECK(out.good(), program, ": --json: cannot write ", path);
  out << "{\n  \"context\": " << context.text() << ",\n  \"rows\": [";
  for (size_t i = 0; i < rows.size(); ++i) out << (i ? ",\n    " : "\n    ") << rows[i].text();
  out << "\n  ]\n}\n";
  out.close();
  DTENSOR_CHECK(!out.fail(), program, ": --json: cannot write ", path);
}

}  // namespace dtensor::bench
