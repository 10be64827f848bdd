// Copyright 2026 The dtensor Authors.
//
// examples/checkpoint/dtensor_checkpoint.cc: `dtensor-checkpoint`, what a
// checkpoint holds without loading it: every tensor's dtype and global shape,
// and which file and entry hold which box of it.
//
//   dtensor-checkpoint inspect ckpt/step-100         # a directory save wrote
//   dtensor-checkpoint inspect model.safetensors     # a plain file
//
// It reads the index (or the safetensors headers) through
// dtensor::checkpoint::inspect, with the checks load makes, and no tensor
// data. Exit codes: 0 on success, 2 on bad input (a bad command line, a path
// that does not exist, a corrupt index or header; one line on stderr), 1
// when the library fails in a way the input does not explain.
#include <cstdint>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <dtensor/base/check.h>
#include <dtensor/checkpoint/checkpoint.h>
#include <dtensor/checkpoint/safetensors.h>
#include "examples/explain/format.h"

namespace dtensor_checkpoint {
namespace {

using dtensor_explain::bracketed;
using dtensor_explain::Table;

constexpr std::string_view kUsage =
    R"usage(dtensor-checkpoint: what a dtensor checkpoint holds.

Usage:
  dtensor-checkpoint inspect PATH
  dtensor-checkpoint --help

inspect
  PATH is what dtensor::checkpoint::load accepts: a directory written by
  save (read from its index.json), a Hugging Face model directory, or one
  .safetensors file (each entry one whole tensor). Prints one row per box:
  the tensor's name, dtype (safetensors names: F32, BF16, I64, ...) and
  global shape on its first row, then the box as half-open ranges of global
  indices per dim ("[0:4, 0:6]"; "[]" for a 0-dim tensor, "-" for a tensor
  with no elements), and the file and entry holding it. Then the totals.
  Nothing but the index and the files' headers is read.

Exit status: 0 success, 2 bad input (one line on stderr), 1 internal failure.
)usage";

// "[0:4, 2:6]": a box as ranges of global indices.
std::string box_ranges(const dtensor::checkpoint::SavedBox& box) {
  std::string text = "[";
  for (size_t d = 0; d < box.offsets.size(); ++d) {
    text += (d == 0 ? "" : ", ") + std::to_string(box.offsets[d]) + ":" +
            std::to_string(box.offsets[d] + box.sizes[d]);
  }
  return text + "]";
}

// One row per box; the name, dtype and shape on the tensor's first row only.
std::string inspect_text(const std::map<std::string, dtensor::checkpoint::SavedTensor>& tensors) {
  Table table({"tensor", "dtype", "shape", "box", "file", "entry"});
  std::set<std::string> files;
  size_t boxes = 0;
  for (const auto& [name, saved] : tensors) {
    std::vector<std::string> lead = {name, dtensor::checkpoint::safetensors_dtype_name(saved.dtype),
                                     bracketed(saved.shape)};
    if (saved.boxes.empty()) table.add({lead[0], lead[1], lead[2], "-"});
    for (const dtensor::checkpoint::SavedBox& box : saved.boxes) {
      table.add({lead[0], lead[1], lead[2], box_ranges(box), box.file, box.entry});
      lead = {"", "", ""};
      files.insert(box.file);
      ++boxes;
    }
  }
  return table.render() + "totals: tensors " + std::to_string(tensors.size()) + ", boxes " +
         std::to_string(boxes) + ", files " + std::to_string(files.size()) + "\n";
}

int fail(std::string_view message, int exit_code) {
  std::cerr << "dtensor-checkpoint: " << dtensor_explain::one_line(message) << "\n";
  return exit_code;
}

int run(const std::vector<std::string>& args) {
  if (args.size() == 1 && (args[0] == "--help" || args[0] == "-h")) {
    std::cout << kUsage;
    return 0;
  }
  try {
    DTENSOR_CHECK(!args.empty(), "expected a subcommand (inspect); see --help");
    DTENSOR_CHECK(args[0] == "inspect", "unknown subcommand '", args[0], "'; see --help");
    DTENSOR_CHECK(args.size() == 2, "inspect: expected one PATH, found ", args.size() - 1,
                  " arguments; see --help");
    std::cout << inspect_text(dtensor::checkpoint::inspect(args[1]));
    return 0;
  } catch (const dtensor::Error& e) {
    // A bad command line, or a checkpoint the library refuses: the input's
    // fault.
    return fail(e.what(), 2);
  } catch (const std::exception& e) {
    return fail(e.what(), 1);
  }
}

}  // namespace
}  // namespace dtensor_checkpoint

int main(int argc, char** argv) {
  return dtensor_checkpoint::run(std::vector<std::string>(argv + 1, argv + argc));
}
