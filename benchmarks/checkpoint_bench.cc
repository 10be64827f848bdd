// Copyright 2026 The dtensor Authors.
//
// benchmarks/checkpoint_bench.cc: checkpoint::save and checkpoint::load
// throughput beside raw file I/O of the same bytes (issue 20).
//
// State: one float32 DTensor [rows, 1024] as Shard(0) on a 1-D mesh of every
// rank, rows = bytes / 4096 (rounded up to a multiple of the ranks), bytes =
// 1 MiB, 16 MiB and 256 MiB: the size in the name is the GLOBAL tensor's
// bytes; each rank holds bytes / ranks.
// Cases, each rank on its own shard:
//   save       checkpoint::save to a new directory: its file written and
//              fsynced, the index, the directories synced, the rename
//   raw_write  open a new file, write(2) the shard's bytes, fsync, close:
//              the floor of save
//   load       checkpoint::load of a checkpoint of the same layout, saved
//              before the timed iterations: the index and the file's header
//              read and checked on every rank, one all-reduce of the
//              verdict, pread of the shard's bytes straight into the shard
//   raw_read   open the file, pread(2) the shard's bytes into a buffer, close:
//              the floor of load; its buffer is made once and touched before
//              the clock starts, as the shard is.
// The directory left by each save and the file of each raw_write are removed
// after the clock stops, so every iteration writes new files.
//
// Page cache: nothing is dropped from it (that needs root and would time the
// disk instead of the library). Writes are timed through fsync, so save and
// raw_write include reaching the device; load and raw_read read files just
// written, so they are served from the page cache: memory bandwidth plus
// system calls, the same for both. Where the files go decides what the write
// numbers mean: the directory is $DTENSOR_CHECKPOINT_BENCH_DIR, else /tmp
// (check with `df` whether that is tmpfs or a disk).
//
// Timing: each iteration is barrier, the call on every rank, then the span
// from the earliest rank's start to the last rank's end (bench_support.h's
// time_span_over_ranks) as Google Benchmark's manual time. Counters (decimal GB/s, as
// collective_bench):
//   gbps   the global tensor's bytes / time / 1e9
//   bytes  the global tensor's bytes;  ranks  the world size
// Names: <case>/<backend>/<n>ranks/<bytes>, e.g. save/local/4ranks/268435456
// (Google Benchmark appends "/manual_time").
//
// Run (from the build directory; the flags are collective_bench's):
//   benchmarks/checkpoint_bench --backend=local --ranks=4
//   mpirun -np 4 --oversubscribe benchmarks/checkpoint_bench --backend=mpi
//   ... --benchmark_filter=/268435456/                       # 256 MiB only
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>

#include <ATen/ATen.h>
#include <benchmark/benchmark.h>

#include <dtensor/base/check.h>
#include <dtensor/checkpoint/checkpoint.h>
#include <dtensor/checkpoint/files.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/placements/placements.h>
#include "benchmarks/bench_support.h"

namespace dtensor {
namespace {

using bench::BenchRank;
using bench::Command;
using bench::rank_of;
using bench::RankContext;
using bench::size_of;
using checkpoint::join_path;

constexpr int64_t kColumns = 1024;
constexpr int64_t kMinBytes = int64_t{1} << 20;  // 1 MiB
constexpr int64_t kMaxBytes = int64_t{1} << 28;  // 256 MiB
constexpr int64_t kBytesStep = 16;

// Command ids; the report order.
enum Case : int64_t { kSave, kRawWrite, kLoad, kRawRead, kCaseCount };
constexpr const char* kCaseNames[kCaseCount] = {"save", "raw_write", "load", "raw_read"};

// The rows of a `bytes` case: a multiple of `ranks`, so every shard is alike.
int64_t global_rows(int64_t bytes, int ranks) {
  const int64_t rows = bytes / static_cast<int64_t>(kColumns * sizeof(float));
  return (rows + ranks - 1) / ranks * ranks;
}

// The directory every rank of this run uses: rank 0's process id names it.
std::string shared_directory(const RankContext& ctx) {
  const char* base = std::getenv("DTENSOR_CHECKPOINT_BENCH_DIR");
  const double pid = bench::max_over_ranks(ctx, rank_of(ctx) == 0 ? ::getpid() : 0);
  return join_path(base != nullptr ? base : "/tmp",
                   "dtensor-checkpoint-bench-" + std::to_string(static_cast<int64_t>(pid)));
}

// Reads all of `path` into `buffer` (its size), as a program that knows its
// bytes would: open, pread until done, close.
void raw_read(const std::string& path, at::Tensor& buffer) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  DTENSOR_CHECK(fd >= 0, "checkpoint_bench: cannot open ", path, ": ", std::strerror(errno));
  char* out = static_cast<char*>(buffer.data_ptr());
  const int64_t size = buffer.numel() * static_cast<int64_t>(buffer.element_size());
  for (int64_t done = 0; done < size;) {
    const ssize_t got = ::pread(fd, out + done, static_cast<size_t>(size - done), done);
    if (got < 0 && errno == EINTR) continue;
    DTENSOR_CHECK(got > 0, "checkpoint_bench: reading ", path, ": ",
                  got == 0 ? "unexpected end of file" : std::strerror(errno));
    done += got;
  }
  ::close(fd);
}

// Writes `tensor`'s bytes as the new file `path` and flushes it to disk.
void raw_write(const std::string& path, const at::Tensor& tensor) {
  checkpoint::OutputFile file(path);
  file.write(tensor.data_ptr(), tensor.numel() * static_cast<int64_t>(tensor.element_size()));
  file.close();
}

// One benchmark run of a case on one rank: the state (and for the reads,
// the files) made by the constructor, then `time_one` per iteration.
class CheckpointRun {
 public:
  CheckpointRun(const RankContext& ctx, const DeviceMesh& mesh, const std::string& dir, Case which,
                int64_t bytes)
      : ctx_(ctx), dir_(dir), which_(which), leader_(rank_of(ctx) == 0) {
    const int64_t local_rows = global_rows(bytes, size_of(ctx)) / size_of(ctx);
    const at::Tensor local = bench::zeros(ctx.options, local_rows * kColumns).view({-1, kColumns});
    state_ = {{"w", from_local(local, mesh, {Shard::make(0)})}};
    raw_file_ = join_path(dir_, "raw-" + std::to_string(rank_of(ctx)));
    if (which_ == kLoad) checkpoint::save(state_, join_path(dir_, "load"));
    if (which_ == kRawRead) {
      buffer_ = bench::zeros(ctx.options, local.numel());
      raw_write(raw_file_, local);
    }
  }

  ~CheckpointRun() {
    if (which_ == kLoad && leader_) checkpoint::remove_tree(join_path(dir_, "load"));
    if (which_ == kRawRead) checkpoint::remove_tree(raw_file_);
  }
  CheckpointRun(const CheckpointRun&) = delete;
  CheckpointRun& operator=(const CheckpointRun&) = delete;

  // Seconds of one call on every rank together (bench_support.h).
  double time_one() {
    const at::Tensor local = DTensor(state_.at("w")).to_local();
    switch (which_) {
      case kSave: {
        const double seconds = bench::time_span_over_ranks(
            ctx_, [&] { checkpoint::save(state_, join_path(dir_, "save")); });
        if (leader_) checkpoint::remove_tree(join_path(dir_, "save"));
        return seconds;
      }
      case kRawWrite: {
        const double seconds =
            bench::time_span_over_ranks(ctx_, [&] { raw_write(raw_file_, local); });
        checkpoint::remove_tree(raw_file_);
        return seconds;
      }
      case kLoad:
        return bench::time_span_over_ranks(
            ctx_, [&] { checkpoint::load(state_, join_path(dir_, "load")); });
      default:
        return bench::time_span_over_ranks(ctx_, [&] { raw_read(raw_file_, buffer_); });
    }
  }

 private:
  const RankContext& ctx_;
  std::string dir_;
  Case which_;
  bool leader_;
  std::map<std::string, at::Tensor> state_;
  std::string raw_file_;
  at::Tensor buffer_;  // raw_read's destination, its pages touched
};

class CheckpointBenchRank final : public BenchRank {
 public:
  explicit CheckpointBenchRank(const RankContext& ctx)
      : BenchRank(ctx), mesh_(ctx.comm, {size_of(ctx)}, {"x"}), dir_(shared_directory(ctx)) {
    bench::check_one_host(ctx);
    if (rank_of(ctx) == 0) checkpoint::make_directories(dir_);
    ctx.comm->barrier();
  }

  // Every run has ended in a collective, so no rank uses the files any more.
  ~CheckpointBenchRank() override {
    if (rank_of(ctx()) == 0) checkpoint::remove_tree(dir_);
  }

  void register_benchmarks() override {
    const std::string suffix = "/" + std::string(ctx().comm->backend_name()) + "/" +
                               std::to_string(size_of(ctx())) + "ranks/";
    for (int64_t c = 0; c < kCaseCount; ++c) {
      for (int64_t bytes = kMinBytes; bytes <= kMaxBytes; bytes *= kBytesStep) {
        const std::string name = kCaseNames[c] + suffix + std::to_string(bytes);
        benchmark::RegisterBenchmark(
            name.c_str(),
            [this, c, bytes](benchmark::State& state) { run_benchmark(state, c, bytes); })
            ->UseManualTime()
            ->Unit(benchmark::kMillisecond);
      }
    }
  }

  void follow(const Command& command) override {
    CheckpointRun run(ctx(), mesh_, dir_, static_cast<Case>(command.id), command.bytes);
    for (int64_t i = 0; i < command.iterations; ++i) run.time_one();
  }

  std::string describe(const Command& c) const override {
    return std::string(kCaseNames[c.id]) + " of " + std::to_string(c.bytes) + " bytes, " +
           std::to_string(c.iterations) + " iterations";
  }

 private:
  void run_benchmark(benchmark::State& state, int64_t which, int64_t bytes) {
    announce(Command{which, bytes, static_cast<int64_t>(state.max_iterations)});
    CheckpointRun run(ctx(), mesh_, dir_, static_cast<Case>(which), bytes);
    double total_seconds = 0;
    for (auto _ : state) {
      const double seconds = run.time_one();
      state.SetIterationTime(seconds);
      total_seconds += seconds;
    }
    const double moved =
        static_cast<double>(global_rows(bytes, size_of(ctx())) * kColumns * sizeof(float));
    state.counters["gbps"] = moved * static_cast<double>(state.iterations()) / total_seconds / 1e9;
    state.counters["bytes"] =
        benchmark::Counter(moved, benchmark::Counter::kDefaults, benchmark::Counter::OneK::kIs1024);
    state.counters["ranks"] = size_of(ctx());
  }

  DeviceMesh mesh_;
  std::string dir_;
};

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  return dtensor::bench::bench_main(
      argc, argv, {"checkpoint_bench", [](const dtensor::bench::RankContext& ctx) {
                     return std::make_unique<dtensor::CheckpointBenchRank>(ctx);
                   }});
}
