// Copyright 2026 The dtensor Authors.
//
// dtensor/redistribute/trace_sink.h (<dtensor/redistribute/trace_sink.h>):
// where dtensor reports what it runs on the calling thread, for a debug trace
// (dtensor/debug/trace.h records and prints them; implement TraceSink for
// your own).
//
// Three kinds of events, each a span on trace_clock_ns(): an operator on
// DTensors (the dispatcher's, with its inputs' and outputs' placements), a
// redistribute (an executed plan, with the plan), and a collective (each one
// CollectiveCounter counts, with the bytes it counts). They nest in time: an
// op's input redistribute and its collectives fall inside the op's span.
//
//   MySink sink;
//   {
//     dtensor::ScopedTraceSink tracing(sink);  // this thread, until it ends
//     loss.backward();
//   }
//
// A sink sees the thread that installed it: libtorch runs the backward of
// CUDA tensors on its own device threads, whose events no sink receives.
// Without a sink, reporting costs one thread-local load per event.
#pragma once

#include <cstdint>
#include <string>

namespace dtensor {

struct TraceSpan {
  int64_t begin_ns = 0;
  int64_t end_ns = 0;
};

struct OpEvent {
  std::string op;       // "aten::mm"
  std::string inputs;   // placements per tensor input: "S(0); R"
  std::string outputs;  // placements per output
  TraceSpan span;
};

struct RedistributeEvent {
  std::string from;  // placements: "S(0),R"
  std::string to;
  std::string plan;  // RedistributePlan::to_string()
  TraceSpan span;
};

struct CollectiveEvent {
  std::string collective;  // as CollectiveCounter names it: "all_reduce"
  int64_t bytes = 0;       // as CollectiveCounter counts them
  TraceSpan span;
};

class TraceSink {
 public:
  virtual ~TraceSink() = default;
  virtual void on_op(OpEvent event) = 0;
  virtual void on_redistribute(RedistributeEvent event) = 0;
  virtual void on_collective(CollectiveEvent event) = 0;
};

// Sends the calling thread's events to `sink` while it lives (the sink
// outlives it); an outer scope's sink gets them again when it ends.
class ScopedTraceSink {
 public:
  explicit ScopedTraceSink(TraceSink& sink);
  ~ScopedTraceSink();
  ScopedTraceSink(const ScopedTraceSink&) = delete;
  ScopedTraceSink& operator=(const ScopedTraceSink&) = delete;

 private:
  TraceSink* previous_;
};

// The calling thread's sink; null when none.
TraceSink* trace_sink();

// Nanoseconds on a steady clock, the events' time base.
int64_t trace_clock_ns();

}  // namespace dtensor
