// sparsepush/checkpoint/file.hpp: the POSIX file I/O of checkpoints. write_file_atomic writes a
// temporary file, fsyncs it, renames it over the target and fsyncs the directory, so a reader sees
// the old file or the new one, never a torn one (a SIGKILL at any point leaves the previous
// checkpoint intact); read_file_bytes reads a whole file. Failures are checkpoint_error.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <span>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

#include "format.hpp"

namespace sparsepush {
inline namespace v0 {

/// Write `bytes` to `path` atomically: path.tmp, fsync, rename over path, fsync the directory.
inline void write_file_atomic(const std::string& path, std::span<const std::byte> bytes) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw checkpoint_error("cannot create " + tmp + ": " + std::strerror(errno));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      const std::string why = std::strerror(errno);
      ::close(fd);
      ::unlink(tmp.c_str());
      throw checkpoint_error("cannot write " + tmp + ": " + why);
    }
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw checkpoint_error("cannot flush " + tmp + ": " + why);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    ::unlink(tmp.c_str());
    throw checkpoint_error("cannot rename " + tmp + " to " + path + ": " + why);
  }
  const auto slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {  // make the rename itself durable
    ::fsync(dfd);
    ::close(dfd);
  }
}

/// The bytes of a file (at most max_bytes), or checkpoint_error naming the path.
inline std::vector<std::byte> read_file_bytes(const std::string& path, std::size_t max_bytes = std::size_t{1} << 36) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw checkpoint_error("cannot open " + path + ": " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw checkpoint_error(path + " is not a regular file");
  }
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size > max_bytes) {
    ::close(fd);
    throw checkpoint_error(path + " is " + std::to_string(size) + " bytes, more than the " +
                           std::to_string(max_bytes) + " a checkpoint may have");
  }
  std::vector<std::byte> out(size);
  std::size_t done = 0;
  while (done < size) {
    const ssize_t r = ::read(fd, out.data() + done, size - done);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      ::close(fd);
      throw checkpoint_error("cannot read " + path + (r < 0 ? std::string(": ") + std::strerror(errno) : ": it shrank"));
    }
    done += static_cast<std::size_t>(r);
  }
  ::close(fd);
  return out;
}

}  // namespace v0
}  // namespace sparsepush
