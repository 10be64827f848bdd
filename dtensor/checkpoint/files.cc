// Copyright 2026 The dtensor Authors.
#include <dtensor/checkpoint/files.h>

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <dtensor/base/check.h>

namespace dtensor::checkpoint {

OutputFile::OutputFile(const std::string& path) : path_(path) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  DTENSOR_CHECK(fd_ >= 0, "checkpoint: cannot create ", path, ": ", std::strerror(errno));
}

OutputFile::~OutputFile() {
  if (fd_ >= 0) ::close(fd_);
}

void OutputFile::write(const void* data, int64_t size) {
  const char* bytes = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd_, bytes, static_cast<size_t>(size));
    if (written < 0 && errno == EINTR) continue;
    DTENSOR_CHECK(written > 0, "checkpoint: writing ", path_, ": ", std::strerror(errno));
    bytes += written;
    size -= written;
  }
}

void OutputFile::close() {
  DTENSOR_CHECK(::fsync(fd_) == 0, "checkpoint: flushing ", path_, ": ", std::strerror(errno));
  const int fd = fd_;
  fd_ = -1;
  DTENSOR_CHECK(::close(fd) == 0, "checkpoint: closing ", path_, ": ", std::strerror(errno));
}

void sync_directory(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  DTENSOR_CHECK(fd >= 0, "checkpoint: cannot open the directory ", path, ": ",
                std::strerror(errno));
  const int status = ::fsync(fd);
  const int error = errno;
  ::close(fd);
  DTENSOR_CHECK(status == 0, "checkpoint: flushing the directory ", path, ": ",
                std::strerror(error));
}

std::string join_path(const std::string& directory, const std::string& name) {
  if (directory.empty()) return name;
  return directory.back() == '/' ? directory + name : directory + "/" + name;
}

std::string without_trailing_slashes(const std::string& path) {
  const size_t end = path.find_last_not_of('/');
  return end == std::string::npos ? path.substr(0, 1) : path.substr(0, end + 1);
}

std::string parent_directory(const std::string& path) {
  const std::string trimmed = without_trailing_slashes(path);
  const size_t slash = trimmed.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : trimmed.substr(0, slash);
}

bool path_exists(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0;
}

int64_t read_at(int fd, void* out, int64_t size, int64_t position) {
  char* into = static_cast<char*>(out);
  int64_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, into + done, static_cast<size_t>(size - done), position + done);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return -1;
    if (got == 0) break;
    done += got;
  }
  return done;
}

std::optional<std::string> read_file_if_exists(const std::string& path) {
  int fd = -1;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0 && (errno == ENOENT || errno == ENOTDIR)) return std::nullopt;
  DTENSOR_CHECK(fd >= 0, "checkpoint: cannot read ", path, ": ", std::strerror(errno));
  // Closed on every way out, a failed allocation for a huge file included.
  const std::unique_ptr<int, void (*)(int*)> closer(&fd, [](int* f) { ::close(*f); });
  // Straight into the string, asking for a byte more than fstat's size: a
  // file that did not grow comes back whole and short in one read; one that
  // did is read on to its end.
  struct stat info;
  const int64_t size = ::fstat(fd, &info) == 0 ? std::max<int64_t>(info.st_size, 0) : 0;
  std::string text(static_cast<size_t>(size) + 1, '\0');
  int64_t done = 0;
  while (true) {
    const int64_t capacity = static_cast<int64_t>(text.size());
    const int64_t got = read_at(fd, text.data() + done, capacity - done, done);
    DTENSOR_CHECK(got >= 0, "checkpoint: cannot read ", path, ": ", std::strerror(errno));
    done += got;
    if (done < capacity) break;  // the end of the file
    text.resize(2 * text.size());
  }
  text.resize(static_cast<size_t>(done));
  return text;
}

bool is_directory(const std::string& path) {
  struct stat info;
  return ::stat(path.c_str(), &info) == 0 && S_ISDIR(info.st_mode);
}

std::vector<std::string> directory_entries(const std::string& path) {
  DIR* dir = ::opendir(path.c_str());
  DTENSOR_CHECK(dir != nullptr, "checkpoint: cannot list the directory ", path, ": ",
                std::strerror(errno));
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  return names;
}

void make_directories(const std::string& path) {
  if (path.empty() || is_directory(path)) return;
  const std::string parent = parent_directory(path);
  if (parent != path) make_directories(parent);
  DTENSOR_CHECK(::mkdir(path.c_str(), 0755) == 0 || (errno == EEXIST && is_directory(path)),
                "checkpoint: cannot create the directory ", path, ": ", std::strerror(errno));
}

void remove_tree(const std::string& path) {
  struct stat info;
  if (::lstat(path.c_str(), &info) != 0 && errno == ENOENT) return;
  // Children first (FTW_DEPTH), links not followed (FTW_PHYS).
  const auto remove_one = [](const char* name, const struct stat*, int, struct FTW*) {
    return ::remove(name);
  };
  DTENSOR_CHECK(::nftw(path.c_str(), remove_one, 16, FTW_DEPTH | FTW_PHYS) == 0,
                "checkpoint: cannot remove ", path, ": ", std::strerror(errno));
}

void rename_path(const std::string& from, const std::string& to) {
  DTENSOR_CHECK(::rename(from.c_str(), to.c_str()) == 0, "checkpoint: cannot rename ", from, " to ",
                to, ": ", std::strerror(errno));
}

bool exchange_paths(const std::string& a, const std::string& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) return true;
  DTENSOR_CHECK(errno == EINVAL || errno == ENOSYS, "checkpoint: cannot exchange ", a, " and ", b,
                ": ", std::strerror(errno));
  return false;
}

}  // namespace dtensor::checkpoint
