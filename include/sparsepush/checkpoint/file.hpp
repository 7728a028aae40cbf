// sparsepush/checkpoint/file.hpp: the POSIX file I/O of checkpoints. write_file_atomic writes a
// temporary file, fsyncs it, renames it over the target and fsyncs the directory, so a reader sees
// the old file or the new one, never a torn one (a SIGKILL at any point leaves the previous
// checkpoint intact); read_file_bytes reads a whole file. Neither blocks on a FIFO planted where
// a file is meant: only a regular file is read or replaced. Failures are checkpoint_error.
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

namespace detail {
/// What a file is, for messages ("a file", "a FIFO", "a directory", ...).
inline const char* file_kind(mode_t mode) noexcept {
  if (S_ISREG(mode)) return "a file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

/// A descriptor opened by open_regular_file, or why there is none (errno, or 0 for "not a
/// regular file", with the message).
struct opened_file {
  int fd = -1;
  int error = 0;
  std::string why;
};

/// Open `path` read-only if it is a regular file. O_NONBLOCK makes open() return at once on a
/// FIFO (a plain open waits for a writer, forever); fstat then refuses anything but a regular
/// file, and the flag is cleared again for the reads.
inline opened_file open_regular_file(const std::string& path) {
  opened_file f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (f.fd < 0) {
    f.error = errno;
    f.why = "cannot open " + path + ": " + std::strerror(f.error);
    return f;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    f.error = errno;
    f.why = "cannot stat " + path + ": " + std::strerror(f.error);
  } else if (!S_ISREG(st.st_mode)) {
    f.why = path + " is not a regular file (" + file_kind(st.st_mode) + ")";
  }
  if (!f.why.empty()) {
    ::close(f.fd);
    f.fd = -1;
    return f;
  }
  const int flags = ::fcntl(f.fd, F_GETFL);
  if (flags >= 0) ::fcntl(f.fd, F_SETFL, flags & ~O_NONBLOCK);
  return f;
}
}  // namespace detail

/// Write `bytes` to `path` atomically: path.tmp, fsync, rename over path, fsync the directory.
inline void write_file_atomic(const std::string& path, std::span<const std::byte> bytes) {
  const std::string tmp = path + ".tmp";
  // A stale .tmp (a crash) is ours: remove it and create the file anew, so that nothing found
  // there (a FIFO would block open(), a symbolic link would redirect the write) is followed.
  ::unlink(tmp.c_str());
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
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
  const detail::opened_file f = detail::open_regular_file(path);
  if (f.fd < 0) throw checkpoint_error(f.why);
  const int fd = f.fd;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    throw checkpoint_error("cannot stat " + path + ": " + why);
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
