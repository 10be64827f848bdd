// Copyright 2026 The dtensor Authors.
//
// tests/support/redistribute_cases.h: random redistribute cases that any
// backend can run (design.md section 7).
//
// Every rank of `mesh` calls run_random_redistribute_cases with the same seed,
// so all ranks draw the same cases: a random shape (0-3 dims, sizes 0-9, so
// uneven and empty shards occur), random source placements (R, S, SS, RG,
// P(sum)) and targets (R, S, SS, RG). Each case distributes an integer-valued
// tensor to the source, redistributes to the target, and checks the local
// tensor against a direct distribute and the layout's slice, and full_tensor
// against the input, exactly. The local suite runs it on threads, the MPI
// suite on processes.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include <dtensor/mesh/device_mesh.h>

namespace dtensor::testing {

struct RedistributeCaseTotals {
  std::atomic<int64_t> cases{0};
  std::atomic<int64_t> skipped{0};
  std::atomic<int64_t> failures{0};
  std::mutex mutex;
  std::vector<std::string> messages;  // the first few failures

  // Collectives per case, against the mesh dims whose placement changes
  // (informative: design.md promises one collective per changed mesh dim in
  // the cases it names).
  std::map<int64_t, int64_t> collectives_histogram;
  int64_t over_changed = 0;
  std::vector<std::string> over_examples;
  void note_collectives(int64_t collectives, int64_t changed, const std::string& what);
  void fail(const std::string& message);
};

// Runs `cases` random cases on the calling rank. `current` receives a
// description of the case in progress (for errors thrown out of a launcher).
// Counts are recorded by mesh coordinate 0 only.
void run_random_redistribute_cases(const DeviceMesh& mesh, int64_t cases, uint32_t seed,
                                   RedistributeCaseTotals& totals, std::string* current = nullptr);

// The collective counts the placements issue names on a (2, 2) `mesh` (on
// any backend and device): [S0,S1]->[S0,S0] in one collective,
// [S0,S1]->[S1,S0] and [S0,S0]->[S1,S1] in at most two, P->R in one, and
// [R,S0]->[S0,R] in one (a cross step); each
// result equal to a direct distribute, and its full_tensor to the input.
void check_issue_collective_counts(const DeviceMesh& mesh);

}  // namespace dtensor::testing
