// Copyright 2026 The dtensor Authors.
//
// tests/checkpoint/checkpoint_sample.cc: writes the checkpoints that
// tests/checkpoint/inspect_test.sh runs dtensor-checkpoint on, with layouts
// whose boxes are known exactly. Usage: checkpoint_sample DIR
//
//   DIR/ckpt               saved by 4 local ranks: a replicated bf16 vector,
//                          an empty tensor, a plain int64 scalar, a float32
//                          matrix as S(0) (uneven: the last rank holds
//                          nothing) and one as S(1),S(0) on a (2, 2) mesh
//   DIR/plain.safetensors  two whole tensors
//   DIR/corrupt            an index.json that is not JSON
#include <cstdio>
#include <exception>
#include <fstream>
#include <map>
#include <string>

#include <ATen/ATen.h>

#include <dtensor/checkpoint/checkpoint.h>
#include <dtensor/checkpoint/files.h>
#include <dtensor/checkpoint/safetensors.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include "tests/support/checkpoint_layouts.h"

namespace dtensor {
namespace {

using checkpoint::join_path;
using testing::lay_out;

void write_samples(const std::string& dir) {
  checkpoint::make_directories(dir);
  run_ranks(4, [&](int) {
    const DeviceMesh line = init_device_mesh("local", {4});
    const DeviceMesh square = init_device_mesh("local", {2, 2});
    const std::map<std::string, at::Tensor> state = {
        {"b", lay_out(at::ones({4}, at::kBFloat16), line, "R")},
        {"empty", lay_out(at::ones({0, 3}), line, "R")},
        {"step", at::full({}, 7, at::kLong)},
        {"w", lay_out(at::ones({5, 3}), line, "S(0)")},
        {"x", lay_out(at::ones({4, 4}), square, "S(1),S(0)")}};
    checkpoint::save(state, join_path(dir, "ckpt"));
  });
  checkpoint::write_safetensors(join_path(dir, "plain.safetensors"),
                                {{"a", at::ones({2, 3})}, {"i", at::ones({5}, at::kInt)}});
  checkpoint::make_directories(join_path(dir, "corrupt"));
  std::ofstream(join_path(join_path(dir, "corrupt"), "index.json")) << "{\"format\": ";
}

}  // namespace
}  // namespace dtensor

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: checkpoint_sample DIR\n");
    return 2;
  }
  try {
    dtensor::write_samples(argv[1]);
  } catch (const std::exception& error) {
    std::fprintf(stderr, "checkpoint_sample: %s\n", error.what());
    return 1;
  }
  return 0;
}
