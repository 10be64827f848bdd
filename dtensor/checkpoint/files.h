// Copyright 2026 The dtensor Authors.
//
// dtensor/checkpoint/files.h: file writes that reach the disk before a
// checkpoint is published (used by save and write_safetensors).
//
//   dtensor::checkpoint::OutputFile file("dir/index.json");
//   file.write(text.data(), text.size());
//   file.close();                                   // fsync, then close
//   dtensor::checkpoint::sync_directory("dir");     // its entries too
#pragma once

#include <cstdint>
#include <string>

namespace dtensor::checkpoint {

// A file created (or truncated) for writing. Every failure throws
// dtensor::Error naming the file and the system's reason.
class OutputFile {
 public:
  explicit OutputFile(const std::string& path);
  // Closes without syncing when `close` was not called (after an error).
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Writes all `size` bytes (retrying short writes).
  void write(const void* data, int64_t size);
  // Flushes the file to disk (fsync) and closes it.
  void close();

 private:
  std::string path_;
  int fd_ = -1;
};

// Flushes the entries of the directory `path` (files created, renamed or
// removed in it) to disk.
void sync_directory(const std::string& path);

}  // namespace dtensor::checkpoint
