// Copyright 2026 The dtensor Authors.
//
// examples/explain/dtensor_explain.cc: `dtensor-explain`, a command-line
// answer to "where does my tensor live?" and "what will this redistribute
// cost?", without writing a program or starting a launcher.
//
//   # Which rows of a [15, 5] tensor each of 8 ranks holds under FSDP-over-TP:
//   dtensor-explain layout --mesh 4,2 --shape 15,5 --placements "SS(0,2),S(0)" --indices
//
//   # The steps, collectives, bytes and estimated cost of a transpose of shards:
//   dtensor-explain plan --mesh 2,2 --shape 8,8 --from "S(0),S(1)" --to "S(1),S(0)"
//
//   # The same, one JSON object per line, for scripts:
//   dtensor-explain plan --mesh 2,2 --shape 8,8 --from "P(sum),R" --to "S(0),R" --json
//
// `layout` is pure arithmetic (compute_local_layout for every coordinate).
// `plan` needs a DeviceMesh, so it runs the planner on every rank of an
// in-process "local" world (one thread per rank) and prints rank 0's plan; the
// ranks' plans are compared, since ranks that planned differently would
// deadlock a real redistribute.
//
// Exit codes: 0 on success, 2 on bad input (one line on stderr), 1 when the
// library fails in a way the input does not explain.
#include <algorithm>
#include <cstdint>
#include <iostream>
#include <new>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <c10/core/ScalarType.h>

#include <dtensor/base/check.h>
#include <dtensor/mesh/device_mesh.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/placements/spec.h>
#include <dtensor/redistribute/planner.h>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "examples/explain/args.h"
#include "examples/explain/format.h"

namespace dtensor_explain {
namespace {

constexpr std::string_view kUsage =
    R"usage(dtensor-explain: how dtensor lays out a tensor and plans a redistribute.

Usage:
  dtensor-explain layout --mesh M0,M1,.. --shape S0,S1,.. --placements P [--indices] [--json]
  dtensor-explain plan   --mesh M0,M1,.. --shape S0,S1,.. --from P --to P
                         [--dtype float32] [--json]
  dtensor-explain --help

layout
  Prints, for every rank of the mesh (row-major rank order), its coordinate,
  local shape and global offset. An empty shard's offset is the dim's size.
  --indices   also print the global indices held along every split dim (dims
              whose list is not the full range). In text, runs of three or
              more consecutive indices print as first..last (inclusive);
              "rows" is the leading dims a Ragged placement merged, "-" means
              no dim is split on that rank.
  --json      one object per rank:
                {"rank":0,"coordinate":[0,0],"local_shape":[2,5],"global_offset":[0,0]}
              with --indices, also "indices": the full index list of every
              local dim, in local order, e.g. [[0,1],[0,1,2,3,4]].

plan
  Prints the steps the planner chooses from --from to --to (Partial allowed on
  both sides): mesh dims, placements before and after, collective, bytes and
  the estimated cost, then the totals. Bytes are what rank 0 sends in a step
  (what it copies, for a "local" step); "max bytes" is the largest over all
  ranks; the totals add up rank 0's bytes over all steps. The planner runs on
  an in-process world of one thread per rank (at most 1024 ranks).
  --dtype     float32 (default), float64, bfloat16, float16, int64, int32
  --json      one object per step (steps count from 1; mesh_dim is null for a
              step merged over several mesh dims):
                {"step":1,"mesh_dim":null,"mesh_dims":[0,1],"src":"S(0),S(1)",
                 "dst":"S(1),S(0)","collective":"all_to_all_v","bytes":128,
                 "max_bytes":128,"cost_us":21.000}
              then {"totals":{"steps":1,"collectives":1,"bytes":128,"cost_us":21.000}}.

Placements are written as dtensor prints them, one per mesh dim, e.g.
"S(0),R", "P(sum),S(1)", "SS(0,2),S(0)", "RG(dims=1,units=[1,2,1,0])".
Options take their value as "--mesh 4,2" or "--mesh=4,2".

Exit status: 0 success, 2 bad input (one line on stderr), 1 internal failure.
)usage";

// One thread per rank is cheap, but not unboundedly so.
constexpr int64_t kMaxPlanRanks = 1024;
// A million output lines is already more than anyone reads, and the cap keeps
// the product of the mesh sizes far from overflowing.
constexpr int64_t kMaxLayoutRanks = int64_t{1} << 20;

std::vector<CommandSpec> command_specs() {
  return {
      {"layout", {"mesh", "shape", "placements"}, {"indices", "json"}},
      {"plan", {"mesh", "shape", "from", "to", "dtype"}, {"json"}},
  };
}

// ---------------------------------------------------------------------------
// Inputs shared by both subcommands.

std::vector<int64_t> read_mesh(const ParsedCommand& command, int64_t max_ranks) {
  const std::vector<int64_t> mesh = parse_sizes("mesh", command.required("mesh"), false);
  int64_t ranks = 1;
  for (const int64_t size : mesh) {
    if (size < 1) {
      throw UsageError(absl::StrCat("--mesh: expected sizes >= 1, found ", bracketed(mesh)));
    }
    // Checked before multiplying, so the product never overflows.
    if (size > max_ranks || ranks > max_ranks / size) {
      throw UsageError(absl::StrCat("--mesh: expected at most ", max_ranks, " ranks for ",
                                    command.name, ", found ", bracketed(mesh)));
    }
    ranks *= size;
  }
  return mesh;
}

int64_t product(const std::vector<int64_t>& sizes) {
  int64_t n = 1;
  for (const int64_t size : sizes) n *= size;
  return n;
}

// Parses and checks placements against the mesh and shape up front, so that a
// count mismatch or a dim out of range is reported once, before any rank runs.
std::vector<dtensor::PlacementPtr> read_placements(const ParsedCommand& command,
                                                   const std::string& option,
                                                   const std::vector<int64_t>& mesh,
                                                   const std::vector<int64_t>& shape) {
  const std::vector<dtensor::PlacementPtr> placements =
      dtensor::parse_placements(command.required(option));
  if (placements.size() != mesh.size()) {
    throw UsageError(absl::StrCat("--", option, ": expected one placement per mesh dim (",
                                  mesh.size(), "), found ", placements.size(), " in '",
                                  command.required(option), "'"));
  }
  return dtensor::normalize_placements(placements, static_cast<int64_t>(shape.size()), mesh);
}

// ---------------------------------------------------------------------------
// layout

std::string local_dim_label(int64_t merged, size_t d) {
  if (merged > 1 && d == 0) return "rows";
  return absl::StrCat("d", merged > 1 ? d + merged - 1 : d);
}

bool is_full_range(const std::vector<int64_t>& indices, int64_t extent) {
  if (static_cast<int64_t>(indices.size()) != extent) return false;
  for (size_t i = 0; i < indices.size(); ++i) {
    if (indices[i] != static_cast<int64_t>(i)) return false;
  }
  return true;
}

// "d0=[8, 9]; d1=[0..2]", or "-" when no dim is split.
std::string split_indices_cell(const dtensor::LocalLayout& layout,
                               const std::vector<int64_t>& shape) {
  std::vector<std::string> pieces;
  const std::vector<int64_t> extents =
      dtensor::LayoutIndices::extents(shape, layout.merged_leading_dims);
  for (size_t d = 0; d < layout.global_indices().size(); ++d) {
    const std::vector<int64_t>& held = layout.global_indices()[d];
    if (is_full_range(held, extents[d])) continue;
    pieces.push_back(
        absl::StrCat(local_dim_label(layout.merged_leading_dims, d), "=[", index_runs(held), "]"));
  }
  return pieces.empty() ? "-" : absl::StrJoin(pieces, "; ");
}

std::string layout_json_line(int64_t rank, const std::vector<int64_t>& coordinate,
                             const dtensor::LocalLayout& layout, bool with_indices) {
  std::string line = absl::StrCat("{\"rank\":", rank, ",\"coordinate\":", json_array(coordinate),
                                  ",\"local_shape\":", json_array(layout.local_shape),
                                  ",\"global_offset\":", json_array(layout.global_offset));
  if (with_indices) absl::StrAppend(&line, ",\"indices\":", json_array(layout.global_indices()));
  return line + "}\n";
}

std::string layout_header(const std::vector<int64_t>& mesh, const std::vector<int64_t>& shape,
                          const std::vector<dtensor::PlacementPtr>& placements) {
  std::string header =
      absl::StrCat("layout of ", bracketed(shape), " on mesh ", parenthesized(mesh), " as ",
                   dtensor::placements_to_string(placements), "\n");
  const int64_t merged = dtensor::merged_leading_dims(placements);
  if (merged > 1) {
    absl::StrAppend(&header, "local dim 0 counts rows: tensor dims 0..", merged - 1,
                    " merged by Ragged\n");
  }
  return header;
}

int run_layout(const ParsedCommand& command) {
  const std::vector<int64_t> mesh = read_mesh(command, kMaxLayoutRanks);
  const std::vector<int64_t> shape = parse_sizes("shape", command.required("shape"), true);
  const std::vector<dtensor::PlacementPtr> placements =
      read_placements(command, "placements", mesh, shape);
  const bool json = command.has_flag("json");
  const bool with_indices = command.has_flag("indices");

  std::vector<std::string> header = {"rank", "coordinate", "local_shape", "global_offset"};
  if (with_indices) header.push_back("indices");
  Table table(std::move(header));
  std::string json_lines;
  for (int64_t rank = 0; rank < product(mesh); ++rank) {
    const std::vector<int64_t> coordinate = dtensor::grid_coordinate(rank, mesh);
    const dtensor::LocalLayout layout =
        dtensor::compute_local_layout(shape, mesh, coordinate, placements);
    if (json) {
      json_lines += layout_json_line(rank, coordinate, layout, with_indices);
      continue;
    }
    std::vector<std::string> row = {absl::StrCat(rank), bracketed(coordinate),
                                    bracketed(layout.local_shape), bracketed(layout.global_offset)};
    if (with_indices) row.push_back(split_indices_cell(layout, shape));
    table.add(std::move(row));
  }
  // Everything is printed at the end, so an error never leaves half a report.
  std::cout << (json ? json_lines : layout_header(mesh, shape, placements) + table.render());
  return 0;
}

// ---------------------------------------------------------------------------
// plan

struct DtypeName {
  std::string_view name;
  c10::ScalarType type;
};

constexpr DtypeName kDtypes[] = {
    {"float32", c10::ScalarType::Float},     {"float64", c10::ScalarType::Double},
    {"bfloat16", c10::ScalarType::BFloat16}, {"float16", c10::ScalarType::Half},
    {"int64", c10::ScalarType::Long},        {"int32", c10::ScalarType::Int},
};

c10::ScalarType read_dtype(std::string_view name) {
  std::vector<std::string> known;
  for (const DtypeName& dtype : kDtypes) {
    if (dtype.name == name) return dtype.type;
    known.emplace_back(dtype.name);
  }
  throw UsageError(absl::StrCat("--dtype: expected one of ", absl::StrJoin(known, ", "),
                                ", found '", std::string(name), "'"));
}

// One planned step, reduced to what is printed: plain values, so nothing of
// the ranks' meshes outlives run_ranks.
struct StepSummary {
  std::vector<int64_t> mesh_dims;
  std::string src;
  std::string dst;
  std::string collective;
  int64_t bytes = 0;      // rank 0's
  int64_t max_bytes = 0;  // over all ranks
  double cost_us = 0;

  bool same_step(const StepSummary& other) const {
    return mesh_dims == other.mesh_dims && src == other.src && dst == other.dst &&
           collective == other.collective;
  }
};

struct PlanSummary {
  std::vector<StepSummary> steps;
  int64_t collectives = 0;
  double total_cost_us = 0;
};

PlanSummary summarize(const dtensor::RedistributePlan& plan) {
  PlanSummary summary;
  for (const dtensor::PlannedStep& step : plan.steps) {
    StepSummary s;
    s.mesh_dims = step.mesh_dims;
    s.src = dtensor::placements_to_string(step.before->placements());
    s.dst = dtensor::placements_to_string(step.after->placements());
    s.collective = step.transition != nullptr ? std::string(step.transition->collective()) : "?";
    // The plan holds rank 0's bytes (every rank plans alike); this rank's
    // own come from its view of the step.
    const dtensor::StepContext mine(*step.before, *step.after, step.mesh_dims);
    s.bytes = s.max_bytes = step.transition != nullptr ? step.transition->bytes(mine) : step.bytes;
    s.cost_us = step.cost;
    summary.steps.push_back(std::move(s));
  }
  summary.collectives = plan.collectives();
  summary.total_cost_us = plan.total_cost;
  return summary;
}

// Rank 0's plan, with max_bytes filled in from every rank's. Throws when a
// rank planned other steps: a real redistribute would then deadlock, which is
// a library bug worth reporting rather than hiding.
PlanSummary merge_ranks(const std::vector<PlanSummary>& per_rank) {
  PlanSummary merged = per_rank[0];
  for (size_t rank = 1; rank < per_rank.size(); ++rank) {
    const std::vector<StepSummary>& steps = per_rank[rank].steps;
    bool same = steps.size() == merged.steps.size();
    for (size_t i = 0; same && i < steps.size(); ++i) same = steps[i].same_step(merged.steps[i]);
    if (!same) {
      throw std::runtime_error(
          absl::StrCat("rank ", rank, " planned different steps from rank 0 (a planner bug)"));
    }
    for (size_t i = 0; i < steps.size(); ++i) {
      merged.steps[i].max_bytes = std::max(merged.steps[i].max_bytes, steps[i].bytes);
    }
  }
  return merged;
}

PlanSummary plan_on_local_world(const std::vector<int64_t>& mesh_shape,
                                const std::vector<int64_t>& shape,
                                const std::vector<dtensor::PlacementPtr>& from,
                                const std::vector<dtensor::PlacementPtr>& to,
                                c10::ScalarType dtype) {
  const int world_size = static_cast<int>(product(mesh_shape));
  // Each rank writes only its own slot, so no lock is needed.
  std::vector<PlanSummary> per_rank(world_size);
  dtensor::run_ranks(world_size, [&](int rank) {
    const dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", mesh_shape);
    const dtensor::DTensorSpec source(mesh, from, shape, dtype);
    const dtensor::DTensorSpec target = source.with_placements(to);
    per_rank[rank] = summarize(*dtensor::plan_redistribute(source, target));
  });
  return merge_ranks(per_rank);
}

int64_t total_bytes(const PlanSummary& plan) {
  int64_t bytes = 0;
  for (const StepSummary& step : plan.steps) bytes += step.bytes;
  return bytes;
}

std::string plan_json(const PlanSummary& plan) {
  std::string out;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const StepSummary& s = plan.steps[i];
    // mesh_dim names the one mesh dim of a step; a step merged over several
    // (one collective on their flattened group) has null there.
    const std::string mesh_dim =
        s.mesh_dims.size() == 1 ? absl::StrCat(s.mesh_dims[0]) : std::string("null");
    absl::StrAppend(&out, "{\"step\":", i + 1, ",\"mesh_dim\":", mesh_dim,
                    ",\"mesh_dims\":", json_array(s.mesh_dims), ",\"src\":", json_string(s.src),
                    ",\"dst\":", json_string(s.dst), ",\"collective\":", json_string(s.collective),
                    ",\"bytes\":", s.bytes, ",\"max_bytes\":", s.max_bytes,
                    ",\"cost_us\":", json_number(s.cost_us), "}\n");
  }
  absl::StrAppend(&out, "{\"totals\":{\"steps\":", plan.steps.size(),
                  ",\"collectives\":", plan.collectives, ",\"bytes\":", total_bytes(plan),
                  ",\"cost_us\":", json_number(plan.total_cost_us), "}}\n");
  return out;
}

std::string plan_text(const PlanSummary& plan, const std::string& title) {
  std::string out = title;
  if (plan.steps.empty()) {
    out += "no steps: the source already has the target layout\n";
  } else {
    Table table(
        {"step", "mesh dims", "from", "to", "collective", "bytes (rank 0)", "max bytes", "est us"});
    for (size_t i = 0; i < plan.steps.size(); ++i) {
      const StepSummary& s = plan.steps[i];
      table.add({absl::StrCat(i + 1), bracketed(s.mesh_dims), s.src, s.dst, s.collective,
                 absl::StrCat(s.bytes), absl::StrCat(s.max_bytes), fixed(s.cost_us, 1)});
    }
    out += table.render();
  }
  absl::StrAppend(&out, "totals: steps ", plan.steps.size(), ", collectives ", plan.collectives,
                  ", bytes (rank 0) ", total_bytes(plan), ", est ", fixed(plan.total_cost_us, 1),
                  " us\n");
  return out;
}

int run_plan(const ParsedCommand& command) {
  const std::vector<int64_t> mesh = read_mesh(command, kMaxPlanRanks);
  const std::vector<int64_t> shape = parse_sizes("shape", command.required("shape"), true);
  const std::vector<dtensor::PlacementPtr> from = read_placements(command, "from", mesh, shape);
  const std::vector<dtensor::PlacementPtr> to = read_placements(command, "to", mesh, shape);
  const std::string dtype_name = command.optional("dtype").value_or("float32");
  const c10::ScalarType dtype = read_dtype(dtype_name);

  const PlanSummary plan = plan_on_local_world(mesh, shape, from, to, dtype);
  if (command.has_flag("json")) {
    std::cout << plan_json(plan);
  } else {
    std::cout << plan_text(
        plan, absl::StrCat("plan for ", bracketed(shape), " ", dtype_name, " on mesh ",
                           parenthesized(mesh), ": ", dtensor::placements_to_string(from), " -> ",
                           dtensor::placements_to_string(to), "\n"));
  }
  return 0;
}

// ---------------------------------------------------------------------------
// Errors

int fail(std::string_view message, int exit_code) {
  std::cerr << "dtensor-explain: " << one_line(message) << "\n";
  return exit_code;
}

int run(const std::vector<std::string>& args) {
  if (wants_help(args)) {
    std::cout << kUsage;
    return 0;
  }
  try {
    const ParsedCommand command = parse_command_line(args, command_specs());
    return command.name == "layout" ? run_layout(command) : run_plan(command);
  } catch (const UsageError& e) {
    return fail(e.what(), 2);
  } catch (const dtensor::Error& e) {
    // The library only throws dtensor::Error for input it refuses, and all
    // input here came from the command line.
    return fail(e.what(), 2);
  } catch (const std::bad_alloc&) {
    return fail("the layout's index lists do not fit in memory: expected a smaller --shape", 2);
  } catch (const std::exception& e) {
    return fail(e.what(), 1);
  }
}

}  // namespace
}  // namespace dtensor_explain

int main(int argc, char** argv) {
  return dtensor_explain::run(std::vector<std::string>(argv + 1, argv + argc));
}
