// Copyright 2026 The dtensor Authors.
//
// dtensor::checkpoint on the local backend: checkpoints saved on one mesh and
// placements load exactly into any other; safetensors files written by hand
// load into sharded DTensors and the files written here parse with an
// independent reader; corrupt input fails clearly and leaves the state as it
// was; a resharding load reads no byte it does not need; optimizer state
// saved on one layout resumes training on another exactly.
#include <dtensor/checkpoint/checkpoint.h>
#include <dtensor/checkpoint/files.h>

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <dtensor/checkpoint/safetensors.h>
#include <dtensor/dtensor.h>
#include <dtensor/mesh/local_communicator.h>
#include <dtensor/nn/parallelize.h>
#include <dtensor/placements/placements.h>
#include "tests/support/checkpoint_layouts.h"
#include "tests/support/expect_error.h"

namespace dtensor::checkpoint {
namespace {

using State = std::map<std::string, at::Tensor>;

// A fresh directory under /tmp, removed with everything in it at the end.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> count{0};
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ = join_path("/tmp", "dtensor-checkpoint-" + std::to_string(::getpid()) + "-" +
                                  test->name() + "-" + std::to_string(count++));
    remove_tree(path_);
    make_directories(path_);
  }
  ~TempDir() { remove_tree(path_); }
  std::string operator/(const std::string& name) const { return join_path(path_, name); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using testing::lay_out;
using testing::local_of;

at::Tensor reference(const std::vector<int64_t>& shape, c10::ScalarType dtype) {
  return testing::checkpoint_reference(shape, dtype);
}

struct Layouts {
  std::vector<int64_t> mesh;
  std::vector<std::string> placements;
};

// Uneven and empty shards of a [7, 5] tensor, strided shards, two dims
// split, Ragged rows (and Ragged over both dims merged), Partial, plain
// tensors.
const std::vector<Layouts>& matrix() {
  static const std::vector<Layouts> layouts = {
      {{1}, {"R", "S(1)", "P(sum)"}},
      {{4},
       {"R", "S(0)", "S(1)", "SS(0,2)", "RG(dims=1,units=[1,2,4,0])", "RG(dims=2,units=[3,1,0,1])",
        "P(sum)", "plain"}},
      {{2, 2},
       {"S(0),S(1)", "S(1),S(0)", "S(0),S(0)", "SS(0,2),S(0)", "R,S(1)",
        "RG(dims=1,units=[3,4]),S(1)", "P(sum),S(1)"}},
      {{2, 2, 2}, {"S(0),S(1),R", "R,S(1),S(0)", "S(1),P(sum),S(0)", "SS(1,2),S(1),R"}},
  };
  return layouts;
}

int world_size(const std::vector<int64_t>& mesh) {
  int size = 1;
  for (const int64_t n : mesh) size *= static_cast<int>(n);
  return size;
}

const std::vector<c10::ScalarType>& dtypes() {
  static const std::vector<c10::ScalarType> all = {at::kFloat, at::kBFloat16, at::kDouble,
                                                   at::kLong};
  return all;
}

std::string tensor_name(size_t layout, c10::ScalarType dtype) {
  return "t" + std::to_string(layout) + "." + c10::toString(dtype);
}

// Save on every mesh and placements of the matrix, load into every other:
// every value exact (a Partial target as distribute_tensor lays it out),
// every shard filled in place.
TEST(CheckpointTest, RoundTripMatrix) {
  const std::vector<int64_t> shape = {7, 5};
  for (const Layouts& source : matrix()) {
    TempDir dir;
    const std::string path = dir / "ckpt";
    run_ranks(world_size(source.mesh), [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", source.mesh);
      State state;
      for (size_t i = 0; i < source.placements.size(); ++i) {
        for (const c10::ScalarType dtype : dtypes()) {
          state[tensor_name(i, dtype)] =
              lay_out(reference(shape, dtype), mesh, source.placements[i]);
        }
      }
      save(state, path);
    });
    for (const Layouts& target : matrix()) {
      for (const std::string& placements : target.placements) {
        SCOPED_TRACE(source.placements.front() + " on " + std::to_string(source.mesh.size()) +
                     "-D -> " + placements);
        run_ranks(world_size(target.mesh), [&](int) {
          const DeviceMesh mesh = init_device_mesh("local", target.mesh);
          State state;
          std::map<std::string, void*> storage;
          for (size_t i = 0; i < source.placements.size(); ++i) {
            for (const c10::ScalarType dtype : dtypes()) {
              const std::string name = tensor_name(i, dtype);
              state[name] = lay_out(at::full(shape, 3, dtype), mesh, placements);
              storage[name] = local_of(state[name]).data_ptr();
            }
          }
          load(state, path);
          for (size_t i = 0; i < source.placements.size(); ++i) {
            for (const c10::ScalarType dtype : dtypes()) {
              const std::string name = tensor_name(i, dtype);
              const at::Tensor expected =
                  local_of(lay_out(reference(shape, dtype), mesh, placements));
              EXPECT_EQ(local_of(state[name]).data_ptr(), storage[name]) << name;
              EXPECT_TRUE(at::equal(local_of(state[name]), expected))
                  << name << " from " << source.placements[i] << ": " << local_of(state[name])
                  << " vs " << expected;
            }
          }
        });
      }
    }
  }
}

// A 0-dim tensor and an empty one round-trip too.
TEST(CheckpointTest, ScalarsAndEmptyTensors) {
  TempDir dir;
  run_ranks(2, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    State state = {{"scalar", at::scalar_tensor(2.5, at::kDouble)},
                   {"empty", lay_out(at::zeros({0, 3}), mesh, "S(0)")}};
    save(state, dir / "ckpt");
    State loaded = {{"scalar", at::scalar_tensor(0.0, at::kDouble)},
                    {"empty", lay_out(at::zeros({0, 3}), mesh, "S(1)")}};
    load(loaded, dir / "ckpt");
    EXPECT_EQ(loaded["scalar"].item<double>(), 2.5);
  });
}

// The little-endian bytes of `value`.
std::string u64_bytes(uint64_t value) {
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  return bytes;
}

template <typename T>
std::string raw_bytes(const std::vector<T>& values) {
  std::string bytes(values.size() * sizeof(T), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// Writes a safetensors file byte by byte: the length (or `length` when
// given), the header as given, the data.
void write_file(const std::string& path, const std::string& header, const std::string& data,
                std::optional<uint64_t> length = std::nullopt) {
  std::ofstream out(path, std::ios::binary);
  out << u64_bytes(length.value_or(header.size())) << header << data;
}

// A file written per the format, not by our writer, loads into sharded
// DTensors (uneven and empty shards) and plain tensors.
TEST(CheckpointTest, HandWrittenSafetensorsLoadsIntoShards) {
  TempDir dir;
  std::vector<float> a(24);
  for (int i = 0; i < 24; ++i) a[i] = 0.5f * static_cast<float>(i) - 3.0f;
  const std::vector<int64_t> b = {-7, 1LL << 40, 9};
  std::string header =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[6,4],"data_offsets":[0,96]},)"
      R"("b":{"dtype":"I64","shape":[3],"data_offsets":[96,120]}})";
  header.append((8 - header.size() % 8) % 8, ' ');
  const std::string path = dir / "model.safetensors";
  write_file(path, header, raw_bytes(a) + raw_bytes(b));
  const at::Tensor a_expected = at::from_blob(a.data(), {6, 4}, at::kFloat).clone();
  const at::Tensor b_expected =
      at::from_blob(const_cast<int64_t*>(b.data()), {3}, at::kLong).clone();
  for (const std::string placements : {"S(0)", "S(1)", "R", "SS(0,2)"}) {
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {4});
      State state = {{"a", lay_out(at::zeros({6, 4}), mesh, placements)},
                     {"b", lay_out(at::zeros({3}, at::kLong), mesh, "S(0)")}};
      load(state, path);
      EXPECT_TRUE(at::equal(local_of(state["a"]), local_of(lay_out(a_expected, mesh, placements))))
          << placements;
      EXPECT_TRUE(at::equal(local_of(state["b"]), local_of(lay_out(b_expected, mesh, "S(0)"))));
    });
  }
  SafetensorsReader reader(path);
  EXPECT_EQ(reader.metadata().at("format"), "pt");
}

// An independent minimal safetensors reader: every entry of `path` as a
// tensor (F32 and I64 only).
std::string file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The header length a safetensors file's first 8 bytes give.
uint64_t header_length(const std::string& bytes) {
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | static_cast<unsigned char>(bytes[i]);
  return length;
}

std::map<std::string, at::Tensor> read_all(const std::string& path) {
  const std::string bytes = file_bytes(path);
  const uint64_t length = header_length(bytes);
  EXPECT_EQ((8 + length) % 8, 0u) << "header padded to 8 bytes";
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, length));
  std::map<std::string, at::Tensor> tensors;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;
    const auto dtype = entry["dtype"] == "F32" ? at::kFloat : at::kLong;
    const auto shape = entry["shape"].get<std::vector<int64_t>>();
    const auto offsets = entry["data_offsets"].get<std::vector<int64_t>>();
    at::Tensor tensor = at::empty(shape, dtype);
    EXPECT_EQ(offsets[1] - offsets[0], tensor.numel() * tensor.element_size());
    std::memcpy(tensor.data_ptr(), bytes.data() + 8 + length + offsets[0], offsets[1] - offsets[0]);
    tensors[name] = tensor;
  }
  return tensors;
}

// A header longer than a reader's first read (4 KiB: the length and a short
// header come in one pread) is read whole after it, and a file of only a
// short header and no data reads too.
TEST(CheckpointTest, HeadersLongerThanTheFirstReadParse) {
  TempDir dir;
  std::vector<std::pair<std::string, at::Tensor>> many;
  for (int i = 0; i < 300; ++i) {
    many.emplace_back("a_rather_long_tensor_name_" + std::to_string(i),
                      at::full({2}, static_cast<double>(i), at::kDouble));
  }
  const std::string path = dir / "many.safetensors";
  write_safetensors(path, many);
  ASSERT_GT(header_length(file_bytes(path)), 4096u);
  const SafetensorsReader reader(path);
  ASSERT_EQ(reader.entries().size(), many.size());
  double value = 0;
  reader.read(reader.entry("a_rather_long_tensor_name_299"), 8, 8, &value);
  EXPECT_EQ(value, 299.0);
  State state = {{"a_rather_long_tensor_name_7", at::zeros({2}, at::kDouble)}};
  load(state, path);
  EXPECT_TRUE(at::equal(state["a_rather_long_tensor_name_7"], at::full({2}, 7.0, at::kDouble)));

  write_file(dir / "nothing.safetensors", "{}", "");
  EXPECT_TRUE(SafetensorsReader(dir / "nothing.safetensors").entries().empty());
}

// A load reads into shards and plain tensors whose memory is not one block
// (a transposed shard, a slice of wider rows) through their strides, in
// place.
TEST(CheckpointTest, LoadsIntoTensorsThatAreNotContiguous) {
  TempDir dir;
  const at::Tensor w = reference({8, 8}, at::kFloat);
  const at::Tensor p = reference({7, 5}, at::kDouble);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    save({{"w", lay_out(w, mesh, "S(0)")}, {"p", p}}, dir / "ckpt");
  });
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    for (const std::string placements : {"S(0)", "S(1)"}) {
      SCOPED_TRACE(placements);
      const at::Tensor expected = local_of(lay_out(w, mesh, placements));
      // The shard's memory column-major, and a plain tensor in every other
      // column of wider rows.
      const at::Tensor shard = at::zeros({expected.size(1), expected.size(0)}).t();
      const at::Tensor plain = at::zeros({7, 10}, at::kDouble).slice(1, 0, 10, 2);
      ASSERT_FALSE(shard.is_contiguous());
      ASSERT_FALSE(plain.is_contiguous());
      State state = {{"w", from_local(shard, mesh, parse_placements(placements)).tensor()},
                     {"p", plain}};
      load(state, dir / "ckpt");
      EXPECT_EQ(local_of(state["w"]).data_ptr(), shard.data_ptr());
      EXPECT_TRUE(at::equal(shard, expected));
      EXPECT_TRUE(at::equal(plain, p));
    }
  });
}

// Every tensor whose byte size is a multiple of 64 starts at a 64-byte
// aligned file offset (the data section starts aligned, such tensors come
// first), where a reader's pread copies fastest; every other one at a
// multiple of its element size; the file still reads back exactly with the
// independent reader.
TEST(CheckpointTest, WrittenTensorsStartCacheLineAligned) {
  TempDir dir;
  const std::string path = dir / "aligned.safetensors";
  const std::map<std::string, at::Tensor> written = {
      {"a_odd", reference({3}, at::kFloat)},        // 12 bytes
      {"b_aligned", reference({4, 8}, at::kLong)},  // 256 bytes
      {"c_odd", reference({5}, at::kLong)},         // 40 bytes
      {"d_aligned", reference({16}, at::kFloat)}};  // 64 bytes
  write_safetensors(path, {written.begin(), written.end()}, {{"format", "pt"}});
  const int64_t data_start = 8 + static_cast<int64_t>(header_length(file_bytes(path)));
  EXPECT_EQ(data_start % 64, 0);
  const SafetensorsReader reader(path);
  for (const char* name : {"b_aligned", "d_aligned"}) {
    EXPECT_EQ((data_start + reader.entry(name).begin) % 64, 0) << name;
  }
  for (const auto& [name, tensor] : written) {
    EXPECT_EQ((data_start + reader.entry(name).begin) % tensor.element_size(), 0) << name;
  }
  const std::map<std::string, at::Tensor> read = read_all(path);
  ASSERT_EQ(read.size(), written.size());
  for (const auto& [name, tensor] : written) EXPECT_TRUE(at::equal(read.at(name), tensor)) << name;
}

// A checkpoint's files parse with the independent reader, and its index
// rebuilds every tensor; replicated data is written once, spread over ranks.
TEST(CheckpointTest, FilesAreSafetensorsAndIndexRebuildsTensors) {
  TempDir dir;
  const std::string path = dir / "ckpt";
  const at::Tensor w = reference({7, 5}, at::kFloat);
  const at::Tensor v = reference({6}, at::kLong);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2});
    // "u" on another mesh over the same ranks.
    State state = {{"w", lay_out(w, mesh, "S(0),S(1)")},
                   {"v", lay_out(v, mesh, "R,S(0)")},
                   {"r", lay_out(w, mesh, "R,R")},
                   {"u", lay_out(v, init_device_mesh("local", {4}), "S(0)")}};
    save(state, path);
  });
  std::ifstream in(join_path(path, "index.json"));
  const nlohmann::json index = nlohmann::json::parse(in);
  std::map<std::string, std::map<std::string, at::Tensor>> files;
  int64_t entries = 0;
  for (const auto& [name, expected] :
       std::map<std::string, at::Tensor>{{"w", w}, {"v", v}, {"r", w}, {"u", v}}) {
    const nlohmann::json& record = index["tensors"][name];
    EXPECT_EQ(record["shape"].get<std::vector<int64_t>>(), expected.sizes().vec());
    at::Tensor rebuilt = at::full_like(expected, 99);
    int64_t covered = 0;
    for (const nlohmann::json& box : record["boxes"]) {
      const std::string file = box["file"];
      if (!files.count(file)) files[file] = read_all(join_path(path, file));
      const at::Tensor part = files[file].at(box["entry"].get<std::string>());
      at::Tensor destination = rebuilt;
      const auto offsets = box["offsets"].get<std::vector<int64_t>>();
      const auto sizes = box["sizes"].get<std::vector<int64_t>>();
      for (size_t d = 0; d < sizes.size(); ++d)
        destination = destination.narrow(d, offsets[d], sizes[d]);
      destination.copy_(part);
      covered += part.numel();
      ++entries;
    }
    EXPECT_EQ(covered, expected.numel()) << name << ": each element written once";
    EXPECT_TRUE(at::equal(rebuilt, expected)) << name;
  }
  int64_t file_entries = 0;
  for (const auto& [file, tensors] : files) file_entries += static_cast<int64_t>(tensors.size());
  EXPECT_EQ(file_entries, entries);
  // "r" (replicated over all 4) and "v" (over dim 0) are not all written by
  // rank 0.
  EXPECT_GE(files.size(), 4u);
}

// A resharding load reads exactly the bytes the new shards hold.
TEST(CheckpointTest, ReshardingLoadReadsOnlyNeededBytes) {
  TempDir dir;
  const std::string path = dir / "ckpt";
  const at::Tensor w = reference({8, 6}, at::kFloat);
  run_ranks(2, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    save({{"w", lay_out(w, mesh, "S(0)")}}, path);
  });
  for (const auto& [mesh_shape, placements] :
       std::vector<std::pair<std::vector<int64_t>, std::string>>{
           {{4}, "S(0)"}, {{4}, "S(1)"}, {{2, 2}, "S(1),S(0)"}, {{4}, "SS(0,2)"}}) {
    run_ranks(world_size(mesh_shape), [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", mesh_shape);
      State state = {{"w", lay_out(at::zeros({8, 6}), mesh, placements)}};
      ReadCounter counter;
      load(state, path);
      const at::Tensor local = local_of(state["w"]);
      EXPECT_EQ(counter.bytes(), local.numel() * 4) << placements;
      EXPECT_TRUE(at::equal(local, local_of(lay_out(w, mesh, placements)))) << placements;
    });
  }
}

// Saving again replaces the checkpoint whole and leaves nothing beside it.
TEST(CheckpointTest, SaveReplacesAnOlderCheckpoint) {
  TempDir dir;
  const std::string path = dir / "ckpt";
  for (const double value : {1.0, 2.0}) {
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {4});
      save({{"w", lay_out(at::full({5, 3}, value), mesh, "S(0)")}}, path);
    });
  }
  State state = {{"w", at::zeros({5, 3})}};
  load(state, path);
  EXPECT_TRUE(at::equal(state["w"], at::full({5, 3}, 2.0)));
  EXPECT_EQ(directory_entries(dir.path()).size(), 1u);
}

// inspect tells the boxes a save wrote, and the whole tensors of a plain
// file, without reading their data.
TEST(CheckpointTest, InspectDescribesTheSavedBoxes) {
  TempDir dir;
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    save({{"w", lay_out(at::ones({5, 3}), mesh, "S(0)")}}, dir / "ckpt");
  });
  ReadCounter counter;
  const std::map<std::string, SavedTensor> saved = inspect(dir / "ckpt");
  ASSERT_EQ(saved.size(), 1u);
  const SavedTensor& w = saved.at("w");
  EXPECT_EQ(w.shape, (std::vector<int64_t>{5, 3}));
  EXPECT_EQ(w.dtype, at::kFloat);
  // 5 rows over 4 ranks: 2, 2, 1 and none.
  ASSERT_EQ(w.boxes.size(), 3u);
  for (int64_t k = 0; k < 3; ++k) {
    const SavedBox& box = w.boxes[k];
    EXPECT_EQ(box.file, "rank-0000" + std::to_string(k) + ".safetensors");
    EXPECT_EQ(box.entry, "w@" + std::to_string(k));
    EXPECT_EQ(box.offsets, (std::vector<int64_t>{2 * k, 0}));
    EXPECT_EQ(box.sizes, (std::vector<int64_t>{k < 2 ? 2 : 1, 3}));
  }
  write_safetensors(dir / "plain.safetensors", {{"a", at::ones({2}, at::kLong)}});
  const SavedTensor a = inspect(dir / "plain.safetensors").at("a");
  EXPECT_EQ(a.dtype, at::kLong);
  ASSERT_EQ(a.boxes.size(), 1u);
  EXPECT_EQ(a.boxes[0].file, "plain.safetensors");
  EXPECT_EQ(a.boxes[0].sizes, (std::vector<int64_t>{2}));
  EXPECT_EQ(counter.bytes(), 0);
  DTENSOR_EXPECT_ERROR(inspect(dir / "nothing-here"), "does not exist");
}

// A save that fails on some rank throws on every rank (an async one from
// wait()) and leaves the older checkpoint whole and nothing beside it.
TEST(CheckpointTest, FailedSaveLeavesTheOlderCheckpoint) {
  TempDir dir;
  const std::string path = dir / "ckpt";
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    save({{"w", lay_out(at::full({5, 3}, 1.0), mesh, "S(0)")}}, path);
    // The plain complex tensor is rank 1's to write, and safetensors has no
    // name for its dtype.
    const State bad = {{"a", lay_out(at::full({5, 3}, 2.0), mesh, "S(0)")},
                       {"b", at::zeros({2}, at::kComplexFloat)}};
    DTENSOR_EXPECT_ERROR(save(bad, path), "failed on");
    // Async: the same failure, thrown by wait().
    SaveHandle pending = save(bad, path, {.async = true});
    DTENSOR_EXPECT_ERROR(pending.wait(), "failed on");
  });
  State state = {{"w", at::zeros({5, 3})}};
  load(state, path);
  EXPECT_TRUE(at::equal(state["w"], at::full({5, 3}, 1.0)));
  EXPECT_EQ(directory_entries(dir.path()).size(), 1u);
}

// A temporary directory that cannot be made (its parent is a file) fails
// the save on every rank, naming the leader's error, before anything is
// written.
TEST(CheckpointTest, SaveWhoseDirectoryCannotBeMadeFailsOnEveryRank) {
  TempDir dir;
  const std::string file = dir / "a-file";
  std::ofstream(file) << "not a directory";
  run_ranks(4, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const State state = {{"w", lay_out(at::full({5, 3}, 1.0), mesh, "S(0)")}};
    DTENSOR_EXPECT_ERROR(
        save(state, join_path(file, "ckpt")),
        rank == 0
            ? "creating the temporary directory for " + file + "/ckpt failed on rank 0, here: "
            : "creating the temporary directory for " + file + "/ckpt failed on rank 0; ");
  });
  EXPECT_EQ(directory_entries(dir.path()).size(), 1u);
}

// A Hugging Face sharded model directory (an index naming each tensor's
// file) loads into sharded DTensors.
TEST(CheckpointTest, HuggingFaceShardedDirectoryLoads) {
  TempDir dir;
  const at::Tensor a = reference({6, 4}, at::kBFloat16);
  const at::Tensor b = reference({5}, at::kFloat);
  write_safetensors(dir / "model-00001-of-00002.safetensors", {{"a", a}});
  write_safetensors(dir / "model-00002-of-00002.safetensors",
                    {{"b", b}, {"unused", at::ones({3})}});
  std::ofstream(dir / "model.safetensors.index.json")
      << R"({"metadata": {"total_size": 68}, "weight_map": {"a": "model-00001-of-00002.safetensors",)"
      << R"( "b": "model-00002-of-00002.safetensors"}})";
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2});
    State state = {{"a", lay_out(at::zeros({6, 4}, at::kBFloat16), mesh, "S(1),S(0)")},
                   {"b", lay_out(at::zeros({5}), mesh, "R,S(0)")}};
    load(state, dir.path());
    EXPECT_TRUE(at::equal(local_of(state["a"]), local_of(lay_out(a, mesh, "S(1),S(0)"))));
    EXPECT_TRUE(at::equal(local_of(state["b"]), local_of(lay_out(b, mesh, "R,S(0)"))));
  });
}

// A file only some ranks need is gone: those ranks fail, the others learn
// it, and no rank changes a tensor.
TEST(CheckpointTest, ErrorOnSomeRanksLeavesEveryRankUntouched) {
  TempDir dir;
  const std::string path = dir / "ckpt";
  const at::Tensor w = reference({8, 3}, at::kFloat);
  run_ranks(2, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    save({{"w", lay_out(w, mesh, "S(0)")}}, path);
  });
  remove_tree(join_path(path, "rank-00001.safetensors"));
  run_ranks(4, [&](int rank) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    State state = {{"w", lay_out(at::zeros({8, 3}), mesh, "S(0)")}};
    DTENSOR_EXPECT_ERROR(load(state, path),
                         rank < 2 ? "failed on 2 other rank(s); no tensor changed" : "cannot open");
    EXPECT_TRUE(at::equal(local_of(state["w"]), at::zeros({2, 3})));
  });
}

// Async saves to one directory overlap as a training loop makes them (step
// k+1's save starts before step k's handle is replaced, which waits): each
// publishes in turn, none takes the other's temporary directory, and a
// user's directory named alike is left alone.
TEST(CheckpointTest, OverlappingAsyncSavesToOneDirectory) {
  TempDir dir;
  const at::Tensor w = reference({6, 4}, at::kFloat);
  make_directories(dir / "ckpt.old-backup");
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    State state = {{"w", lay_out(w, mesh, "S(0)")}};
    SaveHandle pending;
    for (int step = 0; step < 3; ++step) {
      pending = save(state, dir / "ckpt", {.async = true});
      local_of(state["w"]).add_(1);
    }
    pending.wait();
    State loaded = {{"w", lay_out(at::zeros({6, 4}), mesh, "R")}};
    load(loaded, dir / "ckpt");
    EXPECT_TRUE(at::equal(local_of(loaded["w"]), w + 2));
  });
  EXPECT_EQ(directory_entries(dir.path()), (std::vector<std::string>{"ckpt", "ckpt.old-backup"}));
}

// An async save returns once the tensors are copied: changing them before
// wait() changes nothing in the checkpoint, which appears only when every
// rank has waited. The handle's destructor waits too; a synchronous save's
// handle has nothing left to do.
TEST(CheckpointTest, AsyncSaveSnapshotsTheTensors) {
  TempDir dir;
  const at::Tensor w = reference({7, 5}, at::kFloat);
  const at::Tensor b = reference({3}, at::kLong);
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2, 2});
    State state = {{"w", lay_out(w, mesh, "S(0),S(1)")},
                   {"p", lay_out(w, mesh, "P(sum),S(0)")},
                   {"b", b.clone()}};
    auto mutate = [&] {
      for (auto& [name, tensor] : state) local_of(tensor).add_(1);
    };
    SaveHandle pending = save(state, dir / "ckpt", {.async = true});
    mutate();
    EXPECT_FALSE(path_exists(dir / "ckpt"));
    pending.wait();
    EXPECT_TRUE(path_exists(dir / "ckpt"));
    pending.wait();  // nothing left
    {
      const SaveHandle dropped = save(state, dir / "dropped", {.async = true});
      mutate();
    }
    save(state, dir / "sync").wait();
    for (const auto& [path, offset] :
         std::vector<std::pair<std::string, int64_t>>{{"ckpt", 0}, {"dropped", 1}, {"sync", 2}}) {
      SCOPED_TRACE(path);
      State loaded = {{"w", lay_out(at::zeros({7, 5}), mesh, "S(1),R")},
                      {"p", lay_out(at::zeros({7, 5}), mesh, "R,S(0)")},
                      {"b", at::zeros({3}, at::kLong)}};
      load(loaded, dir / path);
      EXPECT_TRUE(at::equal(local_of(loaded["w"]), local_of(lay_out(w + offset, mesh, "S(1),R"))));
      // The Partial tensor's sum gains `offset` once per dp rank.
      EXPECT_TRUE(
          at::equal(local_of(loaded["p"]), local_of(lay_out(w + 2 * offset, mesh, "R,S(0)"))));
      EXPECT_TRUE(at::equal(loaded["b"], b + offset));
    }
  });
}

// A module's parameters and buffers by dotted name, loaded in place.
TEST(CheckpointTest, ModuleStateDictLoadsInPlace) {
  TempDir dir;
  torch::nn::Sequential model(torch::nn::Linear(4, 3), torch::nn::Linear(3, 2));
  State state = state_dict(*model);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : state) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"0.bias", "0.weight", "1.bias", "1.weight"}));
  save(state, dir / "ckpt");
  const at::Tensor saved = model->parameters()[0].detach().clone();
  void* storage = model->parameters()[0].data_ptr();
  {
    at::NoGradGuard no_grad;
    for (at::Tensor& parameter : model->parameters()) parameter.zero_();
  }
  load_state_dict(*model, dir / "ckpt");
  EXPECT_EQ(model->parameters()[0].data_ptr(), storage);
  EXPECT_TRUE(at::equal(model->parameters()[0], saved));
}

// Each bad input gives its error on every rank and changes no tensor.
TEST(CheckpointTest, BadInputFailsClearlyAndLeavesStateUntouched) {
  TempDir dir;
  const std::string good_header = R"({"a":{"dtype":"F32","shape":[4,2],"data_offsets":[0,32]}})";
  const std::string data(32, '\0');
  struct Case {
    std::string file;
    std::string header;
    std::string data;
    std::optional<uint64_t> length;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"truncated", good_header, data, 4096, "runs past the end of the file"},
      {"out_of_range", R"({"a":{"dtype":"F32","shape":[4,2],"data_offsets":[0,64]}})", data,
       std::nullopt, "expected 0 <= begin <= end <= 32"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[4,2],"data_offsets":[0,32]},"z":{"dtype":"F32","shape":[2],"data_offsets":[24,32]}})",
       data, std::nullopt, "overlap"},
      {"size", R"({"a":{"dtype":"F32","shape":[4,2],"data_offsets":[0,16]}})", data, std::nullopt,
       "needs 32"},
      {"json", R"({"a":{"dtype":"F32",)", data, std::nullopt, "not valid JSON"},
      {"dtype", R"({"a":{"dtype":"F9","shape":[4,2],"data_offsets":[0,32]}})", data, std::nullopt,
       "unknown dtype \"F9\""},
      {"missing", R"({"b":{"dtype":"F32","shape":[4,2],"data_offsets":[0,32]}})", data,
       std::nullopt, "no tensor \"a\""},
      {"shape", R"({"a":{"dtype":"F32","shape":[2,4],"data_offsets":[0,32]}})", data, std::nullopt,
       "expected the global shape [4, 2]"},
      {"wrong_dtype", R"({"a":{"dtype":"I32","shape":[4,2],"data_offsets":[0,32]}})", data,
       std::nullopt, "expected dtype Float"},
  };
  for (const Case& c : cases)
    write_file(dir / (c.file + ".safetensors"), c.header, c.data, c.length);
  std::ofstream(dir / "short.safetensors") << "abc";
  // A checkpoint whose index lost a box.
  const std::string uncovered = dir / "uncovered";
  run_ranks(2, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {2});
    save({{"a", lay_out(at::ones({4, 2}), mesh, "S(0)")}}, uncovered);
  });
  {
    std::ifstream in(join_path(uncovered, "index.json"));
    nlohmann::json index = nlohmann::json::parse(in);
    index["tensors"]["a"]["boxes"].erase(1);
    std::ofstream(join_path(uncovered, "index.json")) << index.dump();
  }
  // A checkpoint whose index cannot be read.
  const std::string unreadable = dir / "unreadable";
  make_directories(join_path(unreadable, "index.json"));
  run_ranks(4, [&](int) {
    const DeviceMesh mesh = init_device_mesh("local", {4});
    const at::Tensor before = reference({4, 2}, at::kFloat);
    State state = {{"a", lay_out(before, mesh, "S(0)")}, {"p", before.clone()}};
    auto expect_untouched = [&] {
      EXPECT_TRUE(at::equal(local_of(state["a"]), local_of(lay_out(before, mesh, "S(0)"))));
      EXPECT_TRUE(at::equal(state["p"], before));
    };
    for (const Case& c : cases) {
      SCOPED_TRACE(c.file);
      State one = {{"a", state["a"]}};
      DTENSOR_EXPECT_ERROR(load(one, dir / (c.file + ".safetensors")), c.error);
      expect_untouched();
    }
    // "p" is checked before "a" is read: nothing changes.
    DTENSOR_EXPECT_ERROR(load(state, dir / "out_of_range.safetensors"), "data_offsets");
    DTENSOR_EXPECT_ERROR(load(state, dir / "short.safetensors"),
                         "expected at least the 8-byte header length");
    DTENSOR_EXPECT_ERROR(load(state, uncovered), "boxes hold 4 elements, expected the tensor's 8");
    DTENSOR_EXPECT_ERROR(load(state, dir / "nothing-here"), "does not exist");
    DTENSOR_EXPECT_ERROR(load(state, ""), "does not exist");
    DTENSOR_EXPECT_ERROR(load(state, unreadable), "index.json: Is a directory");
    State partial = {{"a", lay_out(before, mesh, "P(sum)")}};
    DTENSOR_EXPECT_ERROR(load(partial, uncovered), "boxes hold 4 elements");
    EXPECT_TRUE(at::equal(local_of(partial["a"]), local_of(lay_out(before, mesh, "P(sum)"))));
    DTENSOR_EXPECT_ERROR(load(state, dir.path()), "without any");
    expect_untouched();
  });
}

// ---------------------------------------------------------------------------
// Optimizer state.

using OptimizerPtr = std::unique_ptr<torch::optim::Optimizer>;

struct OptimizerCase {
  std::string name;
  std::function<OptimizerPtr(const std::vector<at::Tensor>&)> make;
};

const std::vector<OptimizerCase>& optimizer_cases() {
  static const std::vector<OptimizerCase> cases = {
      {"Adam",
       [](const std::vector<at::Tensor>& p) -> OptimizerPtr {
         return std::make_unique<torch::optim::Adam>(
             p, torch::optim::AdamOptions(0.1).weight_decay(0.01));
       }},
      {"AdamW_amsgrad",
       [](const std::vector<at::Tensor>& p) -> OptimizerPtr {
         return std::make_unique<torch::optim::AdamW>(
             p, torch::optim::AdamWOptions(0.1).amsgrad(true));
       }},
      {"SGD_nesterov",
       [](const std::vector<at::Tensor>& p) -> OptimizerPtr {
         return std::make_unique<torch::optim::SGD>(
             p, torch::optim::SGDOptions(0.1).momentum(0.9).nesterov(true));
       }},
  };
  return cases;
}

// A float64 torch::nn::Linear(5, 6) whose weight [6, 5] and bias [6] hold
// fixed values (times `scale`), laid out as `weight` and `bias` over `mesh`
// (none: a plain module). Collective over the mesh.
torch::nn::Linear linear(const std::optional<DeviceMesh>& mesh, const std::string& weight,
                         const std::string& bias, double scale = 1) {
  torch::nn::Linear model(torch::nn::LinearOptions(5, 6));
  model->to(at::kDouble);
  {
    at::NoGradGuard no_grad;
    model->weight.copy_(reference({6, 5}, at::kDouble).mul(0.1 * scale));
    model->bias.copy_(reference({6}, at::kDouble).mul(-0.2 * scale));
  }
  if (mesh) {
    nn::distribute_parameter(*model, "weight", *mesh, parse_placements(weight));
    nn::distribute_parameter(*model, "bias", *mesh, parse_placements(bias));
  }
  return model;
}

// Steps [first, last) of training with gradients that depend on the step
// alone, laid out as their parameters: every update is elementwise, so
// every layout computes the one-device values exactly.
void train_steps(torch::nn::Module& model, torch::optim::Optimizer& optimizer, int first,
                 int last) {
  for (int step = first; step < last; ++step) {
    for (at::Tensor& parameter : model.parameters()) {
      const bool distributed = is_dtensor(parameter);
      const at::Tensor global =
          reference(distributed ? DTensor(parameter).sizes() : parameter.sizes().vec(), at::kDouble)
              .mul(0.3)
              .add(0.1 * step)
              .cos();
      parameter.mutable_grad() = distributed ? distribute_tensor(global, DTensor(parameter).mesh(),
                                                                 DTensor(parameter).placements())
                                                   .tensor()
                                             : global;
    }
    optimizer.step();
  }
}

// The parameters' global values by name.
State global_parameters(const torch::nn::Module& model) {
  State values;
  for (const auto& [name, tensor] : state_dict(model))
    values[name] = is_dtensor(tensor) ? DTensor(tensor).full_tensor() : tensor.detach().clone();
  return values;
}

// The names of an optimizer's state: per parameter, named as in the module,
// and the learning rate of each param group.
TEST(CheckpointTest, OptimizerStateDictNames) {
  auto names_of = [](const State& state) {
    std::vector<std::string> names;
    for (const auto& [name, tensor] : state) names.push_back(name);
    return names;
  };
  torch::nn::Linear model = linear(std::nullopt, "", "");
  const OptimizerPtr adamw = optimizer_cases()[1].make(model->parameters());
  EXPECT_EQ(names_of(state_dict(*adamw, *model)),
            (std::vector<std::string>{
                "optim.bias.exp_avg", "optim.bias.exp_avg_sq", "optim.bias.max_exp_avg_sq",
                "optim.bias.step", "optim.param_groups.0.lr", "optim.weight.exp_avg",
                "optim.weight.exp_avg_sq", "optim.weight.max_exp_avg_sq", "optim.weight.step"}));
  // Not stepped yet: the state its first step would create, not installed.
  EXPECT_TRUE(adamw->state().empty());
  EXPECT_EQ(state_dict(*adamw, *model).at("optim.weight.step").item<int64_t>(), 0);
  const OptimizerPtr sgd = optimizer_cases()[2].make(model->parameters());
  EXPECT_EQ(names_of(state_dict(*sgd, *model)),
            (std::vector<std::string>{"optim.bias.momentum_buffer", "optim.param_groups.0.lr",
                                      "optim.weight.momentum_buffer"}));
  torch::optim::SGD plain_sgd(model->parameters(), torch::optim::SGDOptions(0.5));
  EXPECT_EQ(names_of(state_dict(plain_sgd, *model)),
            (std::vector<std::string>{"optim.param_groups.0.lr"}));
  EXPECT_EQ(state_dict(plain_sgd, *model).at("optim.param_groups.0.lr").item<double>(), 0.5);

  torch::optim::RMSprop rmsprop(model->parameters());
  DTENSOR_EXPECT_ERROR(state_dict(rmsprop, *model),
                       "expected torch::optim::Adam, AdamW or SGD, found torch::optim::RMSprop");
  torch::optim::AdamW stranger({at::zeros({2}, at::kDouble).requires_grad_()});
  DTENSOR_EXPECT_ERROR(state_dict(stranger, *model),
                       "parameter 0 of param group 0: expected one of the module's 2 parameters");
}

// Model and optimizer saved after 2 steps on mesh (4) with uneven and empty
// shards, loaded into a fresh model and optimizer (not stepped) on (2, 2)
// with other placements and into a plain one, then 2 more steps: every
// parameter equals 4 uninterrupted steps on one device exactly, and the
// created state is laid out as its parameter.
TEST(CheckpointTest, OptimizerStateResumesOnAnotherLayout) {
  for (const OptimizerCase& c : optimizer_cases()) {
    SCOPED_TRACE(c.name);
    TempDir dir;
    const std::string path = dir / "ckpt";
    torch::nn::Linear uninterrupted = linear(std::nullopt, "", "");
    const OptimizerPtr reference_optimizer = c.make(uninterrupted->parameters());
    train_steps(*uninterrupted, *reference_optimizer, 0, 4);
    const State expected = global_parameters(*uninterrupted);

    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {4});
      torch::nn::Linear model = linear(mesh, "S(0)", "S(0)");
      const OptimizerPtr optimizer = c.make(model->parameters());
      train_steps(*model, *optimizer, 0, 2);
      State state = state_dict(*model);
      state.merge(state_dict(*optimizer, *model));
      save(state, path);
    });
    run_ranks(4, [&](int) {
      const DeviceMesh mesh = init_device_mesh("local", {2, 2});
      torch::nn::Linear model = linear(mesh, "S(1),S(0)", "R,S(0)", /*scale=*/-3);
      const OptimizerPtr optimizer = c.make(model->parameters());
      load_state_dict(*model, path);
      load_state_dict(*optimizer, *model, path);
      for (const auto& [name, tensor] : state_dict(*optimizer, *model)) {
        if (!is_dtensor(tensor)) continue;
        const std::string parameter = name.substr(6, name.find('.', 6) - 6);
        EXPECT_TRUE(same_placements(DTensor(tensor).placements(),
                                    DTensor(state_dict(*model).at(parameter)).placements()))
            << name;
      }
      train_steps(*model, *optimizer, 2, 4);
      for (const auto& [name, value] : global_parameters(*model))
        EXPECT_TRUE(at::equal(value, expected.at(name))) << name;
    });
    torch::nn::Linear plain = linear(std::nullopt, "", "", /*scale=*/-3);
    const OptimizerPtr optimizer = c.make(plain->parameters());
    load_state_dict(*plain, path);
    load_state_dict(*optimizer, *plain, path);
    train_steps(*plain, *optimizer, 2, 4);
    for (const auto& [name, value] : global_parameters(*plain))
      EXPECT_TRUE(at::equal(value, expected.at(name))) << name;
  }
}

// A checkpoint without the optimizer's state fails to load into it and
// leaves it as it was: no state created, the learning rate kept.
TEST(CheckpointTest, OptimizerLoadFailureLeavesOptimizerUntouched) {
  TempDir dir;
  torch::nn::Linear model = linear(std::nullopt, "", "");
  save(state_dict(*model), dir / "model-only");
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(0.25));
  DTENSOR_EXPECT_ERROR(load_state_dict(optimizer, *model, dir / "model-only"),
                       "no tensor \"optim.bias.exp_avg\" in the checkpoint");
  EXPECT_TRUE(optimizer.state().empty());
  EXPECT_EQ(optimizer.param_groups()[0].options().get_lr(), 0.25);
}

}  // namespace
}  // namespace dtensor::checkpoint
