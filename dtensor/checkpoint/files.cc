// Copyright 2026 The dtensor Authors.
#include <dtensor/checkpoint/files.h>

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

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

}  // namespace dtensor::checkpoint
