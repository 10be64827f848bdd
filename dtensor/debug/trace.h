// Copyright 2026 The dtensor Authors.
//
// dtensor/debug/trace.h: a debug trace of what dtensor runs, after PyTorch's
// CommDebugMode and DebugMode.
//
// While a `DebugTrace` lives, the calling thread's operators on DTensors
// (with their inputs' and outputs' placements), redistributes (with their
// plans) and collectives (those CollectiveCounter counts, with the same
// bytes) are recorded, each with the module that ran it: the innermost one
// dtensor::nn::call is running, named by its path under `root`
// ("layers.0.attention.wo"). Ops outside any module, backward's among them
// (C++ modules have no backward hooks), count under "(no module)".
//
//   dtensor::debug::DebugTrace trace(*model);
//   model->loss(ids, targets).backward();
//   std::cout << trace.table();                        // per module: ops, collectives, bytes
//   trace.write_chrome_trace("trace-rank0.json", rank);  // open in Perfetto
//
// One trace per thread, destroyed on it: each rank of the local backend (a
// thread) or each MPI process makes its own; on CUDA, backward runs on
// libtorch's device threads and is not recorded (dtensor/redistribute/
// trace_sink.h). Recording costs a clock read and a few strings
// per event, so keep it to the steps you look at.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <torch/nn/module.h>

#include <dtensor/redistribute/trace_sink.h>

namespace dtensor::debug {

class DebugTrace final : public TraceSink {
 public:
  enum class Kind { kOp, kRedistribute, kCollective };
  struct Event {
    Kind kind = Kind::kOp;
    std::string name;    // "aten::mm", "redistribute", "all_reduce"
    std::string detail;  // op: "S(0); R -> S(0)"; redistribute: "S(0) -> R" and the plan
    int64_t bytes = 0;   // collectives: as CollectiveCounter counts them
    std::string module;  // path under the root, or "(no module)"
    TraceSpan span;
  };
  // What ran inside one module (not counting its submodules').
  struct ModuleSummary {
    int64_t ops = 0;
    std::map<std::string, int64_t, std::less<>> collectives;  // by kind
    int64_t bytes = 0;
  };

  // Records the calling thread's events from now until destruction. Modules
  // not under `root` (or all, without one) are named by their type.
  DebugTrace();
  explicit DebugTrace(const torch::nn::Module& root);
  ~DebugTrace() override;
  DebugTrace(const DebugTrace&) = delete;
  DebugTrace& operator=(const DebugTrace&) = delete;

  const std::vector<Event>& events() const { return events_; }
  // Collectives by kind, and their bytes: equal to a CollectiveCounter's
  // over the same span.
  std::map<std::string, int64_t, std::less<>> collective_counts() const;
  std::map<std::string, int64_t, std::less<>> collective_bytes() const;
  // By module path, in path order.
  std::map<std::string, ModuleSummary> by_module() const;

  // A table, one row per module and a total: ops, collectives by kind, bytes.
  std::string table() const;
  // Chrome trace JSON (Perfetto, chrome://tracing): every event a span on
  // one timeline of process `rank`, nested as they ran.
  std::string chrome_trace_json(int64_t rank) const;
  // Writes chrome_trace_json to `path`; throws dtensor::Error when it cannot.
  void write_chrome_trace(const std::string& path, int64_t rank) const;

  void on_op(OpEvent event) override;
  void on_redistribute(RedistributeEvent event) override;
  void on_collective(CollectiveEvent event) override;

 private:
  std::string current_module() const;

  std::map<const torch::nn::Module*, std::string> module_paths_;
  std::vector<Event> events_;
  std::optional<ScopedTraceSink> recording_;
};

}  // namespace dtensor::debug
