// Copyright 2026 The dtensor Authors.
//
// dtensor/checkpoint/files.h: file writes that reach the disk before a
// checkpoint is published (used by save and write_safetensors), and the
// directory operations of save and load.
//
//   dtensor::checkpoint::OutputFile file("dir/index.json");
//   file.write(text.data(), text.size());
//   file.close();                                   // fsync, then close
//   dtensor::checkpoint::sync_directory("dir");     // its entries too
//
// The directory operations are POSIX calls, not std::filesystem: the pip
// libtorch (2.11+cu130) exports its own copy of std::filesystem, which
// interposes libstdc++'s in every program linked with it, and its remove_all
// jumps to address 0 (seen on the GPU machine).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

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

// `directory` + "/" + `name` (`name` alone when `directory` is empty).
std::string join_path(const std::string& directory, const std::string& name);
// `path` without trailing slashes ("/" stays).
std::string without_trailing_slashes(const std::string& path);
// The directory holding `path` ("." for a name without one).
std::string parent_directory(const std::string& path);

bool path_exists(const std::string& path);
// Reads up to `size` bytes at `position` of the open file `fd` into `out`,
// retrying interrupted and short reads until `size` or the end of the file:
// the bytes read, or -1 with errno set.
int64_t read_at(int fd, void* out, int64_t size, int64_t position);
// The whole of the file `path` (open, read, close: no stream), or nothing
// when there is none (ENOENT, or ENOTDIR: a directory of the path is a
// file). Throws dtensor::Error naming the file and the system's reason when
// it exists but cannot be read.
std::optional<std::string> read_file_if_exists(const std::string& path);
bool is_directory(const std::string& path);
// The names in the directory `path` ("." and ".." left out), sorted.
std::vector<std::string> directory_entries(const std::string& path);
// Creates `path` and the directories above it that are missing.
void make_directories(const std::string& path);
// Removes `path` and, for a directory, everything in it; nothing when it
// does not exist. Symbolic links are removed, never followed.
void remove_tree(const std::string& path);
// Renames `from` to `to` (rename(2): atomic within a file system).
void rename_path(const std::string& from, const std::string& to);
// Swaps the existing `a` and `b` in one atomic step (renameat2(2) with
// RENAME_EXCHANGE). Returns false, changing nothing, where the file system
// or kernel cannot (NFS, for one); throws dtensor::Error on other failures.
bool exchange_paths(const std::string& a, const std::string& b);

}  // namespace dtensor::checkpoint
