// sparsepush/train/outputs.hpp: a run's output files, checked. Before round 0 every output path
// is checked without creating or touching anything (a regular file or a new one in a writable
// directory; never a device, FIFO or directory; no file named twice). While and after the run
// every write, flush and close is checked: a failed output never ends the run early and never
// passes silently; it is reported, naming the file.
#pragma once

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../checkpoint/file.hpp"
#include "../config.hpp"

namespace sparsepush {
inline namespace v0 {


/// `path` (given as `option`) can be written as a regular file: it is one (writable), or it does
/// not exist and its directory does and is writable. Nothing is created. config_error otherwise.
inline void check_output(const std::string& option, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (!S_ISREG(st.st_mode))
      throw config_error(option + " " + path + " is " + detail::file_kind(st.st_mode) +
                                     ", not a regular file: give the path of a file");
    if (::access(path.c_str(), W_OK) != 0)
      throw config_error("cannot write " + option + " " + path + ": " + std::strerror(errno));
    return;
  }
  if (errno != ENOENT) throw config_error("cannot write " + option + " " + path + ": " + std::strerror(errno));
  std::string dir = std::filesystem::path(path).parent_path().string();
  if (dir.empty()) dir = ".";
  if (::stat(dir.c_str(), &st) != 0)
    throw config_error("cannot write " + option + " " + path + ": directory " + dir + " " +
                                   (errno == ENOENT ? std::string("does not exist") : std::strerror(errno)));
  if (!S_ISDIR(st.st_mode))
    throw config_error("cannot write " + option + " " + path + ": " + dir + " is " + detail::file_kind(st.st_mode) +
                                   ", not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw config_error("cannot write " + option + " " + path + ": directory " + dir + ": " + std::strerror(errno));
}

/// The file a path names, for comparing: symlinks and "..", "." resolved as far as the path exists.
namespace detail {
inline std::filesystem::path file_identity(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(path, ec);
  if (ec) p = std::filesystem::absolute(path, ec).lexically_normal();
  return p;
}
}  // namespace detail

/// No two of these (option, path) pairs name the same file (empty paths are skipped).
inline void check_distinct(const std::vector<std::pair<std::string, std::string>>& outputs) {
  for (std::size_t a = 0; a < outputs.size(); ++a)
    for (std::size_t b = a + 1; b < outputs.size(); ++b) {
      const auto& [oa, pa] = outputs[a];
      const auto& [ob, pb] = outputs[b];
      if (pa.empty() || pb.empty() || detail::file_identity(pa) != detail::file_identity(pb)) continue;
      throw config_error(oa + " " + pa + " and " + ob + " " + pb +
                                     " name the same file: give each output a path of its own");
    }
}

/// A file written through stdio with every write, flush and close checked. The first failure is
/// kept (error()) and the file is given up: later writes do nothing. Names the file in `what`.
class output_file {
 public:
  output_file() = default;
  output_file(const output_file&) = delete;
  output_file& operator=(const output_file&) = delete;
  ~output_file() {
    if (f_) std::fclose(f_);
  }

  /// Open `path` for writing (truncating); false (error() says why) when it cannot be. `fresh`:
  /// a scratch file of ours, made anew (whatever is there is removed, a symlink is not followed,
  /// and a FIFO put there cannot block the open).
  bool open(const std::string& path, std::string what, bool fresh = false) {
    what_ = std::move(what);
    path_ = path;
    if (fresh) {
      ::unlink(path.c_str());
      const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
      f_ = fd >= 0 ? ::fdopen(fd, "wb") : nullptr;
      if (fd >= 0 && !f_) ::close(fd);
    } else {
      f_ = std::fopen(path.c_str(), "wb");
    }
    if (!f_) fail_errno();
    return f_ != nullptr;
  }
  /// True while the file is open.
  bool is_open() const noexcept { return f_ != nullptr; }
  /// Appends s (nothing when the file is not open; a failure is kept for close() and error()).
  void write(std::string_view s) {
    if (!f_) return;
    if (std::fwrite(s.data(), 1, s.size(), f_) != s.size()) fail_errno();
  }
  /// Flushes what was written (a failure is kept for close() and error()).
  void flush() {
    if (f_ && std::fflush(f_) != 0) fail_errno();
  }
  /// Flush and close; false when this or anything before failed.
  bool close() {
    if (f_ && std::fflush(f_) != 0) fail_errno();  // closes the file
    if (f_) {
      std::FILE* f = std::exchange(f_, nullptr);
      if (std::fclose(f) != 0) fail_errno();
    }
    return error_.empty();
  }
  /// The first failure, naming the file and the system's reason ("" when none).
  const std::string& error() const noexcept { return error_; }
  /// The file's path, as opened.
  const std::string& path() const noexcept { return path_; }

 private:
  void fail_errno() {
    const int e = errno;
    if (error_.empty()) error_ = "cannot write " + what_ + " " + path_ + ": " + std::strerror(e);
    if (f_) {
      std::fclose(f_);
      f_ = nullptr;
    }
  }
  std::FILE* f_ = nullptr;
  std::string what_, path_, error_;
};

/// Write `text` to `path` whole (every step checked); the error, or empty.
inline std::string write_whole(const std::string& path, const std::string& what, std::string_view text) {
  output_file f;
  if (f.open(path, what)) f.write(text);
  f.close();
  return f.error();
}

}  // namespace v0
}  // namespace sparsepush
