// Copyright 2026 The dtensor Authors.
#include <dtensor/redistribute/trace_sink.h>

#include <chrono>

namespace dtensor {
namespace {

thread_local TraceSink* current_sink = nullptr;

}  // namespace

ScopedTraceSink::ScopedTraceSink(TraceSink& sink) : previous_(current_sink) {
  current_sink = &sink;
}

ScopedTraceSink::~ScopedTraceSink() { current_sink = previous_; }

TraceSink* trace_sink() { return current_sink; }

int64_t trace_clock_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace dtensor
