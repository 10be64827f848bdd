// Copyright 2026 The dtensor Authors.
//
// dtensor/checkpoint/safetensors.h: the safetensors file format, written and
// read exactly (https://github.com/huggingface/safetensors).
//
// A file is an 8-byte little-endian header length N, a JSON header of N bytes
// (padded with spaces: written here so that the data section starts at a
// multiple of 64 bytes, a multiple of 8 as the reference writer pads), then
// the data section: each tensor's raw little-endian bytes, row-major. The
// header maps each tensor's name to {"dtype", "shape", "data_offsets":
// [begin, end)} (offsets relative to the data section), plus an optional
// "__metadata__" map of strings.
//
//   dtensor::checkpoint::write_safetensors("w.safetensors", {{"w", at::ones({2, 3})}});
//   dtensor::checkpoint::SafetensorsReader reader("w.safetensors");
//   const auto& entry = reader.entry("w");             // F32, {2, 3}, [0, 24)
//   float row[3];
//   reader.read(entry, /*offset=*/12, /*size=*/12, row);  // the second row only
//
// The reader reads the header once and then only the byte ranges asked for
// (pread), never a whole file.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>

namespace dtensor::checkpoint {

// The safetensors name of `dtype` ("F32", "BF16", "I64", ...). Throws
// dtensor::Error for a dtype the format has no name for.
std::string safetensors_dtype_name(c10::ScalarType dtype);
// The dtype a safetensors name stands for. Throws dtensor::Error naming the
// known names for an unknown one.
c10::ScalarType safetensors_dtype(const std::string& name);

// One tensor of a safetensors file: dtype, shape, and its bytes [begin, end)
// relative to the data section.
struct SafetensorsEntry {
  c10::ScalarType dtype;
  std::vector<int64_t> shape;
  int64_t begin = 0;
  int64_t end = 0;
};

// Writes `tensors` (any device, dtype and strides; written as contiguous CPU
// bytes: first, in the order given, those whose byte sizes are multiples of
// 64, each then at a 64-byte aligned file offset, where a reader's pread
// copies fastest; then the others, larger elements first, each at a
// multiple of its element size) and `metadata` as the safetensors file
// `path`, flushed to disk (fsync) before returning. Names must be distinct and not
// "__metadata__". Throws dtensor::Error on a failed write.
void write_safetensors(const std::string& path,
                       const std::vector<std::pair<std::string, at::Tensor>>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

// An open safetensors file whose header has been read and validated: the
// header length fits the file, the header is a JSON object, every dtype is
// known, every shape is a list of sizes >= 0, every data_offsets pair lies in
// the data section and spans exactly shape x element size bytes, and no two
// tensors' bytes overlap. Each violation throws dtensor::Error naming the
// file and the problem.
class SafetensorsReader {
 public:
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(SafetensorsReader&& other) noexcept;
  SafetensorsReader& operator=(SafetensorsReader&& other) = delete;
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, SafetensorsEntry>& entries() const { return entries_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // The entry called `name`; throws dtensor::Error when the file has none.
  const SafetensorsEntry& entry(const std::string& name) const;
  // Reads `size` bytes starting `offset` bytes into `entry`'s data into
  // `destination` (one pread, retried until complete). Throws dtensor::Error
  // for a range outside the entry or a failed read.
  void read(const SafetensorsEntry& entry, int64_t offset, int64_t size, void* destination) const;

 private:
  void parse_header(std::string_view header, int64_t data_size);

  std::string path_;
  int fd_ = -1;
  int64_t data_start_ = 0;
  std::map<std::string, SafetensorsEntry> entries_;
  std::map<std::string, std::string> metadata_;
};

// Counts the tensor bytes the calling thread reads through SafetensorsReader
// (headers excluded) while it lives, so tests can check that a load reads
// nothing it does not need. On the local backend each rank is a thread.
//
//   dtensor::checkpoint::ReadCounter counter;
//   dtensor::checkpoint::load(state, "ckpt");
//   counter.bytes();   // the bytes this rank read
class ReadCounter {
 public:
  ReadCounter();
  int64_t bytes() const;

 private:
  int64_t start_;
};

}  // namespace dtensor::checkpoint
