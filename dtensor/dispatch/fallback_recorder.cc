// Copyright 2026 The dtensor Authors.
#include <dtensor/dispatch/fallback_recorder.h>

namespace dtensor {
namespace {

thread_local FallbackRecorder* innermost_recorder = nullptr;

}  // namespace

FallbackRecorder::FallbackRecorder() : outer_(innermost_recorder) { innermost_recorder = this; }

FallbackRecorder::~FallbackRecorder() { innermost_recorder = outer_; }

void FallbackRecorder::record(std::string_view op_name) {
  for (FallbackRecorder* r = innermost_recorder; r != nullptr; r = r->outer_) {
    r->ops_.emplace(op_name);
  }
}

}  // namespace dtensor
