// Copyright 2026 The dtensor Authors.
//
// dtensor/dispatch/fallback_recorder.h (<dtensor/dispatch/fallback_recorder.h>):
// which ops ran on replicated inputs for lack of a sharding rule.
//
// Under ScopedReplicateFallback an op without a strategy gathers its inputs
// and runs whole: right, and slow. A recorder lists the ops that did, so a
// test can assert a model needs no fallback, and a user can find which rules
// a model lacks:
//
//   dtensor::ScopedReplicateFallback fallback;
//   dtensor::FallbackRecorder recorder;
//   loss = model->forward(x); loss.backward();
//   EXPECT_TRUE(recorder.ops().empty()) << absl::StrJoin(recorder.ops(), ", ");
//
// Recorders nest: each records what ran while it was alive, on the calling
// thread (each rank thread of the local backend records its own).
#pragma once

#include <set>
#include <string>
#include <string_view>

namespace dtensor {

class FallbackRecorder {
 public:
  FallbackRecorder();
  ~FallbackRecorder();
  FallbackRecorder(const FallbackRecorder&) = delete;
  FallbackRecorder& operator=(const FallbackRecorder&) = delete;

  // The ops ("aten::slice_backward") that ran on the fallback, sorted.
  const std::set<std::string, std::less<>>& ops() const { return ops_; }

  // Called by the op runner for each op that runs on the fallback.
  static void record(std::string_view op_name);

 private:
  std::set<std::string, std::less<>> ops_;
  FallbackRecorder* outer_;
};

}  // namespace dtensor
