// Copyright 2026 The dtensor Authors.
//
// The debug trace (dtensor/debug/trace.h) on the Llama example under tensor
// parallelism, 4 local ranks: its collectives and bytes equal
// CollectiveCounter's over the same forward and backward, each module's are
// where the plan puts them, and the Chrome trace holds every event.
#include <gtest/gtest.h>

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <dtensor/debug/trace.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/placements/placements.h>
#include <dtensor/redistribute/collective_counter.h>
#include "examples/llama/llama_parallel.h"

namespace dtensor::examples {
namespace {

using Counts = std::map<std::string, int64_t, std::less<>>;

TEST(LlamaTraceTest, CountsEqualTheCollectiveCounterAndGroupByModule) {
  const LlamaConfig config;
  run_ranks(4, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4}, {"tp"});
    Llama model = seeded_llama(config, 1234);
    parallelize_llama(model, mesh, LlamaPlan::kTensorParallel);
    const at::Tensor tokens = at::arange(32, at::kLong).remainder(config.vocab).reshape({4, 8});
    const DTensor ids = distribute_tensor(tokens, mesh, parse_placements("R"));
    const DTensor targets = distribute_tensor(tokens.roll(-1, 1), mesh, parse_placements("R"));
    CollectiveCounter counter;
    debug::DebugTrace trace(*model);
    model->loss(ids, targets).backward();

    EXPECT_EQ(trace.collective_counts(), counter.by_collective());
    EXPECT_EQ(trace.collective_bytes(), counter.bytes_by_collective());
    // Forward: each block's row-parallel output (attention's wo, the
    // feed-forward's w2) is all-reduced inside that layer, the logits
    // gathered in the head; backward (outside modules) reduces each block's
    // input gradient and the head's.
    const std::map<std::string, debug::DebugTrace::ModuleSummary> modules = trace.by_module();
    for (const char* path : {"layers.0.attention.wo", "layers.0.feed_forward.w2",
                             "layers.1.attention.wo", "layers.1.feed_forward.w2"}) {
      ASSERT_EQ(modules.count(path), 1u) << path;
      EXPECT_EQ(modules.at(path).collectives, (Counts{{"all_reduce", 1}})) << path;
    }
    EXPECT_EQ(modules.at("output").collectives, (Counts{{"all_gather_v", 1}}));
    EXPECT_EQ(modules.at("(no module)").collectives, (Counts{{"all_reduce", 5}}));
    EXPECT_GT(modules.at("layers.0.attention").ops, 0);
    EXPECT_NE(trace.table().find("layers.0.attention.wo"), std::string::npos);

    const std::string path =
        ::testing::TempDir() + "/dtensor-trace-rank" + std::to_string(rank) + ".json";
    trace.write_chrome_trace(path, rank);
    std::ifstream file(path);
    const nlohmann::json json = nlohmann::json::parse(file);
    const nlohmann::json& events = json.at("traceEvents");
    ASSERT_EQ(events.size(), trace.events().size() + 1);  // and the process name
    int64_t collectives = 0;
    for (const nlohmann::json& event : events) {
      EXPECT_EQ(event.at("pid").get<int64_t>(), rank);
      if (event.value("cat", "") == "collective") ++collectives;
    }
    EXPECT_EQ(collectives, counter.total());
  });
}

}  // namespace
}  // namespace dtensor::examples
