// Copyright 2026 The dtensor Authors.
//
// examples/redistribute_tour.cc: a [7, 5] tensor on a (dp=2, tp=2) mesh of
// the in-process "local" backend, redistributed through several layouts.
// Prints each plan (steps, collectives, bytes) and checks every result
// against the single-device tensor. No launcher: `./build/examples/redistribute_tour`.
#include <iostream>
#include <sstream>

#include <ATen/ATen.h>

#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/planner.h>

int main() {
  const at::Tensor global = at::arange(35, at::kFloat).reshape({7, 5});
  const std::vector<std::pair<std::string, std::string>> moves = {
      {"S(0),S(1)", "S(0),S(0)"},   {"S(0),S(1)", "S(1),S(0)"},
      {"S(0),S(0)", "R,R"},         {"SS(0,2),S(0)", "R,R"},
      {"P(sum),S(1)", "S(0),S(1)"}, {"R,RG(dims=1,units=[1,3])", "S(1),R"}};
  std::vector<std::string> report(moves.size());
  bool all_equal = true;
  dtensor::run_ranks(4, [&](int rank) {
    dtensor::DeviceMesh mesh = dtensor::init_device_mesh("local", {2, 2}, {"dp", "tp"});
    for (size_t i = 0; i < moves.size(); ++i) {
      const auto [from, to] = moves[i];
      dtensor::DTensor source =
          dtensor::distribute_tensor(global, mesh, dtensor::parse_placements(from));
      dtensor::DTensor target = source.redistribute(dtensor::parse_placements(to));
      const at::Tensor expected =
          dtensor::distribute_tensor(global, mesh, target.placements()).to_local();
      const bool equal =
          at::equal(target.to_local(), expected) && at::equal(target.full_tensor(), global);
      if (!equal) all_equal = false;
      if (rank == 0) {
        std::ostringstream out;
        out << from << "  ->  " << to << (equal ? "  (matches single-device)" : "  MISMATCH")
            << "\n"
            << dtensor::plan_redistribute(source.spec(), target.placements())->to_string();
        report[i] = out.str();
      }
    }
  });
  std::cout
      << "dtensor redistribute tour: [7, 5] float on DeviceMesh((dp=2, tp=2)), local backend\n";
  for (const std::string& r : report) std::cout << "\n" << r;
  return all_equal ? 0 : 1;
}
