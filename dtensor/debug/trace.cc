// Copyright 2026 The dtensor Authors.
#include <dtensor/debug/trace.h>

#include <algorithm>
#include <fstream>
#include <iomanip>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include <dtensor/base/check.h>
#include <dtensor/nn/module_hooks.h>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace dtensor::debug {
namespace {

constexpr char kNoModule[] = "(no module)";

const char* category(DebugTrace::Kind kind) {
  switch (kind) {
    case DebugTrace::Kind::kOp:
      return "op";
    case DebugTrace::Kind::kRedistribute:
      return "redistribute";
    case DebugTrace::Kind::kCollective:
      return "collective";
  }
  return "";
}

// "all_gather_v x1, all_reduce x9".
std::string describe_collectives(const std::map<std::string, int64_t, std::less<>>& counts) {
  std::vector<std::string> parts;
  for (const auto& [name, count] : counts) parts.push_back(absl::StrCat(name, " x", count));
  return parts.empty() ? "-" : absl::StrJoin(parts, ", ");
}

}  // namespace

DebugTrace::DebugTrace() { recording_.emplace(*this); }

DebugTrace::DebugTrace(const torch::nn::Module& root) {
  for (const auto& item : root.named_modules()) module_paths_[item.value().get()] = item.key();
  module_paths_[&root] = "(root)";
  recording_.emplace(*this);
}

DebugTrace::~DebugTrace() = default;

std::string DebugTrace::current_module() const {
  const std::vector<const torch::nn::Module*>& modules = nn::modules_being_called();
  if (modules.empty()) return kNoModule;
  const auto it = module_paths_.find(modules.back());
  return it != module_paths_.end() ? it->second : modules.back()->name();
}

void DebugTrace::on_op(OpEvent event) {
  events_.push_back({Kind::kOp, std::move(event.op),
                     absl::StrCat(event.inputs, " -> ", event.outputs), 0, current_module(),
                     event.span});
}

void DebugTrace::on_redistribute(RedistributeEvent event) {
  events_.push_back({Kind::kRedistribute, "redistribute",
                     absl::StrCat(event.from, " -> ", event.to, "\n", event.plan), 0,
                     current_module(), event.span});
}

void DebugTrace::on_collective(CollectiveEvent event) {
  events_.push_back({Kind::kCollective, std::move(event.collective), "", event.bytes,
                     current_module(), event.span});
}

std::map<std::string, int64_t, std::less<>> DebugTrace::collective_counts() const {
  std::map<std::string, int64_t, std::less<>> counts;
  for (const Event& e : events_) {
    if (e.kind == Kind::kCollective) ++counts[e.name];
  }
  return counts;
}

std::map<std::string, int64_t, std::less<>> DebugTrace::collective_bytes() const {
  std::map<std::string, int64_t, std::less<>> bytes;
  for (const Event& e : events_) {
    if (e.kind == Kind::kCollective) bytes[e.name] += e.bytes;
  }
  return bytes;
}

std::map<std::string, DebugTrace::ModuleSummary> DebugTrace::by_module() const {
  std::map<std::string, ModuleSummary> summaries;
  for (const Event& e : events_) {
    ModuleSummary& summary = summaries[e.module];
    if (e.kind == Kind::kOp) ++summary.ops;
    if (e.kind == Kind::kCollective) {
      ++summary.collectives[e.name];
      summary.bytes += e.bytes;
    }
  }
  return summaries;
}

std::string DebugTrace::table() const {
  std::map<std::string, ModuleSummary> rows = by_module();
  ModuleSummary total;
  size_t width = 5;  // "total"
  for (const auto& [module, summary] : rows) {
    width = std::max(width, module.size());
    total.ops += summary.ops;
    total.bytes += summary.bytes;
    for (const auto& [name, count] : summary.collectives) total.collectives[name] += count;
  }
  std::ostringstream out;
  const auto row = [&](const std::string& module, const std::string& ops,
                       const std::string& collectives, const std::string& bytes) {
    out << std::left << std::setw(static_cast<int>(width) + 2) << module << std::right
        << std::setw(7) << ops << "  " << std::left << std::setw(40) << collectives << std::right
        << std::setw(12) << bytes << "\n";
  };
  row("module", "ops", "collectives", "bytes");
  for (const auto& [module, summary] : rows) {
    row(module, std::to_string(summary.ops), describe_collectives(summary.collectives),
        std::to_string(summary.bytes));
  }
  row("total", std::to_string(total.ops), describe_collectives(total.collectives),
      std::to_string(total.bytes));
  return out.str();
}

std::string DebugTrace::chrome_trace_json(int64_t rank) const {
  // Events are kept as they end (an op after the collectives inside it).
  int64_t start = events_.empty() ? 0 : events_.front().span.begin_ns;
  for (const Event& e : events_) start = std::min(start, e.span.begin_ns);
  nlohmann::json trace_events = nlohmann::json::array();
  trace_events.push_back({{"name", "process_name"},
                          {"ph", "M"},
                          {"pid", rank},
                          {"args", {{"name", absl::StrCat("rank ", rank)}}}});
  for (const Event& e : events_) {
    nlohmann::json args = {{"module", e.module}};
    if (!e.detail.empty()) args["detail"] = e.detail;
    if (e.kind == Kind::kCollective) args["bytes"] = e.bytes;
    trace_events.push_back({{"name", e.name},
                            {"cat", category(e.kind)},
                            {"ph", "X"},
                            {"ts", static_cast<double>(e.span.begin_ns - start) / 1e3},
                            {"dur", static_cast<double>(e.span.end_ns - e.span.begin_ns) / 1e3},
                            {"pid", rank},
                            {"tid", 0},
                            {"args", std::move(args)}});
  }
  return nlohmann::json{{"traceEvents", std::move(trace_events)}, {"displayTimeUnit", "ns"}}.dump();
}

void DebugTrace::write_chrome_trace(const std::string& path, int64_t rank) const {
  std::ofstream file(path, std::ios::binary | std::ios::trunc);
  DTENSOR_CHECK(file.good(), "DebugTrace::write_chrome_trace: expected a writable file, found \"",
                path, "\" not writable");
  file << chrome_trace_json(rank);
  DTENSOR_CHECK(file.good(), "DebugTrace::write_chrome_trace: writing \"", path, "\" failed");
}

}  // namespace dtensor::debug
