// Copyright 2026 The dtensor Authors.
//
// benchmarks/checkpoint_bench.cc: checkpoint::save and checkpoint::load
// throughput beside raw file I/O of the same bytes (issue 20).
//
// State: one float32 DTensor [rows, 1024] as Shard(0) on a 1-D mesh of every
// rank, rows = bytes / 4096 (rounded up to a multiple of the ranks), bytes =
// 1 MiB, 16 MiB and 256 MiB: the size in the name is the GLOBAL tensor's
// bytes; each rank holds bytes / ranks.
// Cases, each rank on its own shard, each timed beside its raw floor in the
// same benchmark, one after the other in every iteration, so that whatever
// drifts during a run (the page cache, the disk, other work on the machine)
// weighs on both alike:
//   save   checkpoint::save to a new directory: its file written and fsynced,
//          the index, the directories synced, the rename; then raw write:
//          open a new file, write(2) the shard's bytes, fsync, close
//   load   checkpoint::load of a checkpoint of the same layout, saved before
//          the timed iterations: the index and the file's header read and
//          checked on every rank, one vote of every rank's verdict, pread of
//          the shard's bytes straight into the shard; then raw read: open
//          the file, pread(2) the shard's bytes into a buffer, close (its
//          buffer is made once and touched before the clock starts, as the
//          shard is)
// The directory left by each save and the file of each raw write are removed
// after the clock stops, so every iteration writes new files. The values are
// checked after the timed iterations: the shard loaded and the buffer read
// (both zeroed before the first iteration) hold what was saved, and for save
// the last checkpoint written loads back to the shard.
//
// Page cache: nothing is dropped from it (that needs root and would time the
// disk instead of the library). Writes are timed through fsync, so save and
// the raw write include reaching the device; load and the raw read read files
// just written, so they are served from the page cache: memory bandwidth plus
// system calls, the same for both. Where the files go decides what the write
// numbers mean: the directory is $DTENSOR_CHECKPOINT_BENCH_DIR, else /tmp
// (check with `df` whether that is tmpfs or a disk).
//
// Timing: each call (ours, then raw) is barrier, the call on every rank, then
// the span from the earliest rank's start to the last rank's end
// (bench_support.h's time_span_over_ranks). Google Benchmark's manual time is
// ours. Counters (decimal GB/s, as collective_bench):
//   gbps          the global tensor's bytes / our time / 1e9
//   raw_us        the raw call's mean time per iteration, in microseconds
//   raw_gbps      the global tensor's bytes / the raw time / 1e9
//   ratio_to_raw  our total time / the raw total time (<= 1.25 is the goal)
//   bytes         the global tensor's bytes;  ranks  the world size
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
enum Case : int64_t { kSave, kLoad, kCaseCount };
constexpr const char* kCaseNames[kCaseCount] = {"save", "load"};

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

// The values rank `rank`'s shard of `numel` elements is saved with: a
// pattern that differs between ranks and repeats only every 4093 elements,
// so bytes read from the wrong place or file are seen.
at::Tensor shard_values(const at::TensorOptions& options, int64_t numel, int rank) {
  return at::arange(numel, options).remainder(4093).add_(4096.0 * (rank + 1));
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

// Seconds of one call of ours and of its raw floor, on every rank together.
struct Times {
  double ours = 0;
  double raw = 0;
};

// One benchmark run of a case on one rank: the state and the files made by
// the constructor, then `time_one` per iteration, then `check`.
class CheckpointRun {
 public:
  CheckpointRun(const RankContext& ctx, const DeviceMesh& mesh, const std::string& dir, Case which,
                int64_t bytes)
      : ctx_(ctx), dir_(dir), which_(which), leader_(rank_of(ctx) == 0) {
    const int64_t local_rows = global_rows(bytes, size_of(ctx)) / size_of(ctx);
    expected_ = shard_values(ctx.options, local_rows * kColumns, rank_of(ctx)).view({-1, kColumns});
    state_ = {{"w", from_local(expected_.clone(), mesh, {Shard::make(0)})}};
    raw_file_ = join_path(dir_, "raw-" + std::to_string(rank_of(ctx)));
    if (which_ == kLoad) {
      checkpoint::save(state_, join_path(dir_, "load"));
      raw_write(raw_file_, expected_);
      // Zeros (every page touched) that the loads and reads must overwrite.
      DTensor(state_.at("w")).to_local().zero_();
      buffer_ = bench::zeros(ctx.options, expected_.numel()).view({-1, kColumns});
    }
  }

  ~CheckpointRun() {
    if (which_ == kLoad) {
      if (leader_) checkpoint::remove_tree(join_path(dir_, "load"));
      checkpoint::remove_tree(raw_file_);
    }
  }
  CheckpointRun(const CheckpointRun&) = delete;
  CheckpointRun& operator=(const CheckpointRun&) = delete;

  // One call of ours and one of raw (bench_support.h's span timing), raw
  // first every other call (the same on every rank: each makes as many
  // calls), so that neither always follows the other's writeback.
  Times time_one() {
    Times times;
    const auto ours = [&] {
      if (which_ == kSave) {
        times.ours = bench::time_span_over_ranks(
            ctx_, [&] { checkpoint::save(state_, join_path(dir_, "save")); });
        if (leader_) checkpoint::remove_tree(join_path(dir_, "save"));
      } else {
        times.ours = bench::time_span_over_ranks(
            ctx_, [&] { checkpoint::load(state_, join_path(dir_, "load")); });
      }
    };
    const auto raw = [&] {
      if (which_ == kSave) {
        const at::Tensor local = DTensor(state_.at("w")).to_local();
        times.raw = bench::time_span_over_ranks(ctx_, [&] { raw_write(raw_file_, local); });
        checkpoint::remove_tree(raw_file_);
      } else {
        times.raw = bench::time_span_over_ranks(ctx_, [&] { raw_read(raw_file_, buffer_); });
      }
    };
    if (calls_++ % 2 == 0) {
      ours();
      raw();
    } else {
      raw();
      ours();
    }
    return times;
  }

  // After the timed iterations (collective): throws unless the last load and
  // read brought back the saved values, or for save, unless a checkpoint
  // written as the timed ones were loads back into a zeroed shard.
  void check() {
    if (which_ == kSave) {
      const std::string dir = join_path(dir_, "save");
      checkpoint::save(state_, dir);
      std::map<std::string, at::Tensor> loaded = {
          {"w", from_local(at::zeros_like(expected_), DTensor(state_.at("w")).mesh(),
                           {Shard::make(0)})}};
      checkpoint::load(loaded, dir);
      state_ = std::move(loaded);
      ctx_.comm->barrier();  // every rank has read it
      if (leader_) checkpoint::remove_tree(dir);
    } else {
      DTENSOR_CHECK(at::equal(buffer_, expected_), "checkpoint_bench: the raw read of ", raw_file_,
                    " did not return the bytes written");
    }
    DTENSOR_CHECK(at::equal(DTensor(state_.at("w")).to_local(), expected_),
                  "checkpoint_bench: rank ", rank_of(ctx_), ": the shard loaded from ",
                  which_ == kSave ? "the saved" : "the", " checkpoint differs from the one saved");
  }

 private:
  const RankContext& ctx_;
  std::string dir_;
  Case which_;
  bool leader_;
  at::Tensor expected_;  // this rank's saved shard
  std::map<std::string, at::Tensor> state_;
  std::string raw_file_;
  at::Tensor buffer_;  // the raw read's destination, its pages touched
  int64_t calls_ = 0;  // of time_one
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
    run.check();
  }

  std::string describe(const Command& c) const override {
    return std::string(kCaseNames[c.id]) + " of " + std::to_string(c.bytes) + " bytes, " +
           std::to_string(c.iterations) + " iterations";
  }

 private:
  void run_benchmark(benchmark::State& state, int64_t which, int64_t bytes) {
    announce(Command{which, bytes, static_cast<int64_t>(state.max_iterations)});
    CheckpointRun run(ctx(), mesh_, dir_, static_cast<Case>(which), bytes);
    Times total;
    for (auto _ : state) {
      const Times times = run.time_one();
      state.SetIterationTime(times.ours);
      total.ours += times.ours;
      total.raw += times.raw;
    }
    run.check();
    const double moved =
        static_cast<double>(global_rows(bytes, size_of(ctx())) * kColumns * sizeof(float));
    const double iterations = static_cast<double>(state.iterations());
    state.counters["gbps"] = moved * iterations / total.ours / 1e9;
    state.counters["raw_us"] = total.raw / iterations * 1e6;
    state.counters["raw_gbps"] = moved * iterations / total.raw / 1e9;
    state.counters["ratio_to_raw"] = total.ours / total.raw;
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
