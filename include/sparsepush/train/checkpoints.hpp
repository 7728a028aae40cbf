// sparsepush/train/checkpoints.hpp: a run's checkpoint directory. DIR/manifest names the last
// complete checkpoint (its round, the ranks that wrote it and the run's settings); each rank K
// writes its nodes to DIR/round-R.rank-K.ckpt, and the manifest moves on only after every rank
// has written, so a crash at any point leaves the previous checkpoint whole. DIR/lock, held with
// flock(2) by the run that uses the directory, keeps a second run out (the kernel drops the lock
// when its process ends, crash or not). Every file-system failure is the library's error naming
// the path, never a std::filesystem exception.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

#include "../checkpoint.hpp"
#include "settings.hpp"

namespace sparsepush {
inline namespace v0 {

/// What DIR/manifest holds.
struct checkpoint_manifest {
  std::uint32_t round = 0;  ///< the round the checkpoint resumes at
  std::uint32_t ranks = 1;  ///< the processes that wrote it (one file each)
  std::string settings;     ///< run_settings::text() of the run
};

/// The lock a run holds on its checkpoint directory (flock on DIR/lock, which holds the owner's
/// PID for the message a second run gets); released when destroyed or when its process ends.
class checkpoint_lock {
 public:
  checkpoint_lock() = default;
  /// Takes over `fd`, an open descriptor holding the flock on the lock file `path`.
  checkpoint_lock(int fd, std::string path) noexcept : fd_(fd), path_(std::move(path)) {}
  /// Takes o's lock; o holds none afterwards.
  checkpoint_lock(checkpoint_lock&& o) noexcept : fd_(std::exchange(o.fd_, -1)), path_(std::move(o.path_)) {}
  /// Releases this lock, then takes o's; o holds none afterwards.
  checkpoint_lock& operator=(checkpoint_lock&& o) noexcept {
    if (this != &o) {
      release();
      fd_ = std::exchange(o.fd_, -1);
      path_ = std::move(o.path_);
    }
    return *this;
  }
  checkpoint_lock(const checkpoint_lock&) = delete;
  checkpoint_lock& operator=(const checkpoint_lock&) = delete;
  ~checkpoint_lock() { release(); }

  /// True while the lock is held.
  bool held() const noexcept { return fd_ >= 0; }
  /// The lock file's path (DIR/lock).
  const std::string& path() const noexcept { return path_; }
  /// Give the lock up. Closing the descriptor releases the flock; the file stays (removing it
  /// would let a third run lock a new file while a second one still holds the old one).
  void release() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  std::string path_;
};

/// Paths and files of one checkpoint directory.
class checkpoint_directory {
 public:
  /// The directory `dir` (nothing is created or checked here: prepare() does).
  explicit checkpoint_directory(std::string dir) : dir_(std::move(dir)) {}
  /// The directory's path, as given.
  const std::string& path() const noexcept { return dir_; }

  /// Create the directory if missing and check that files can be written there (config_error,
  /// naming it as `what`: "the --checkpoint directory" in a command-line program).
  void prepare(const std::string& what = "the checkpoint directory") const {
    std::error_code made, ec;
    std::filesystem::create_directories(dir_, made);
    const auto st = std::filesystem::status(dir_, ec);
    if (st.type() != std::filesystem::file_type::directory) {
      if (!ec && st.type() != std::filesystem::file_type::not_found)
        throw config_error("cannot create " + what + " " + dir_ + ": it is " + kind(st.type()) + ", not a directory");
      throw config_error("cannot create " + what + " " + dir_ + ": " + (made ? made : ec).message());
    }
    // The probe gets a name of its own (mkstemp: created with O_EXCL): every MPI rank probes the
    // same directory at once, and a FIFO planted under a fixed name would block a plain open.
    std::string probe = dir_ + "/.write-probe.XXXXXX";
    const int fd = ::mkstemp(probe.data());
    if (fd < 0) throw config_error("cannot write in " + what + " " + dir_ + ": " + std::strerror(errno));
    ::close(fd);
    ::unlink(probe.c_str());
  }

  /// Throw checkpoint_error unless the directory exists: what resume needs (it never creates
  /// one). `what` starts the message: "resume DIR: no such directory".
  void require_existing(const std::string& what = "resume") const {
    std::error_code ec;
    const auto st = std::filesystem::status(dir_, ec);
    if (st.type() == std::filesystem::file_type::not_found)
      throw checkpoint_error(what + " " + dir_ + ": no such directory");
    if (ec) throw checkpoint_error(what + " " + dir_ + ": " + ec.message());
    if (st.type() != std::filesystem::file_type::directory)
      throw checkpoint_error(what + " " + dir_ + " is " + kind(st.type()) + ", not a directory");
  }

  /// Whether DIR/manifest exists (false too when the path cannot be examined).
  bool has_manifest() const {
    std::error_code ec;
    return std::filesystem::exists(dir_ + "/manifest", ec);
  }

  /// Lock the directory until the returned object is destroyed (or its process ends), or throw
  /// checkpoint_error "checkpoint directory DIR is in use by process P" while another run, or
  /// another lock() in this process, holds it. The directory must exist. A directory this process
  /// may not write in (a read-only copy to resume from) is locked through an existing lock file
  /// opened read-only, or not at all when it has none (the object's held() is false): no run of
  /// this user can write checkpoints there.
  checkpoint_lock lock() const {
    const std::string path = dir_ + "/lock";
    constexpr int flags = O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC;
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | flags, 0644);
    const bool read_only = fd < 0 && (errno == EACCES || errno == EROFS);
    if (read_only) {
      fd = ::open(path.c_str(), O_RDONLY | flags);
      if (fd < 0 && errno == ENOENT) return {};
    }
    if (fd < 0) throw checkpoint_error("cannot open the lock file " + path + ": " + std::strerror(errno));
    checkpoint_lock held(fd, path);  // closes fd on every throw below
    struct stat st {};
    if (::fstat(fd, &st) != 0) throw checkpoint_error("cannot stat " + path + ": " + std::strerror(errno));
    if (!S_ISREG(st.st_mode))
      throw checkpoint_error("the lock file " + path + " is not a regular file (" + detail::file_kind(st.st_mode) + ")");
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      const int e = errno;
      if (e != EWOULDBLOCK) throw checkpoint_error("cannot lock " + path + ": " + std::strerror(e));
      char buf[32] = {};
      const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      std::string pid(buf, n > 0 ? static_cast<std::size_t>(n) : 0);
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      const bool digits = !pid.empty() && pid.find_first_not_of("0123456789") == std::string::npos;
      throw checkpoint_error("checkpoint directory " + dir_ + " is in use by " +
                             (digits ? "process " + pid : std::string("another process")) + " (it holds " + path +
                             "); two runs cannot share a checkpoint directory");
    }
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (read_only) return held;
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size()))
      throw checkpoint_error("cannot write " + path + ": " + std::strerror(errno));
    return held;
  }

  /// The file rank `rank` writes for the checkpoint of round `round`.
  std::string rank_file(std::uint32_t round, int rank) const {
    return dir_ + "/round-" + std::to_string(round) + ".rank-" + std::to_string(rank) + ".ckpt";
  }

  /// The first rank file of round `round` (ranks 0 .. ranks - 1) that is missing, or "".
  std::string missing_rank_file(std::uint32_t round, std::uint32_t ranks) const {
    for (std::uint32_t k = 0; k < ranks; ++k) {
      std::error_code ec;
      std::string f = rank_file(round, static_cast<int>(k));
      if (!std::filesystem::exists(f, ec)) return f;
    }
    return {};
  }

  /// Writes DIR/manifest atomically: the round, the process count and the settings text of m.
  /// Throws checkpoint_error when the file cannot be written.
  void write_manifest(const checkpoint_manifest& m) const {
    checkpoint_writer w;
    w.section("MANI");
    w.u32(m.round);
    w.u32(m.ranks);
    w.str(m.settings);
    write_file_atomic(dir_ + "/manifest", w.finish());
  }
  /// Reads DIR/manifest; checkpoint_error naming the file when it is missing, corrupted or malformed.
  checkpoint_manifest read_manifest() const {
    const std::string path = dir_ + "/manifest";
    const auto bytes = read_file_bytes(path, std::size_t{1} << 20);
    checkpoint_reader r(bytes, path);
    r.section("MANI");
    checkpoint_manifest m;
    m.round = r.u32("round");
    m.ranks = r.u32("ranks");
    m.settings = r.str("settings", std::size_t{1} << 16);
    r.done();
    return m;
  }

  /// Remove rank `rank`'s files of rounds before `round` (the checkpoints a newer one replaced),
  /// except round `keep` (the round a run resumed from; 0 keeps none). Best effort: a file that
  /// cannot be listed or removed stays.
  void remove_older(std::uint32_t round, int rank, std::uint32_t keep = 0) const {
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      unsigned long r = 0;
      int k = -1;
      if (std::sscanf(name.c_str(), "round-%lu.rank-%d.ckpt", &r, &k) == 2 && k == rank && r < round && r != keep) {
        std::error_code rm;
        std::filesystem::remove(it->path(), rm);
      }
    }
  }

 private:
  static const char* kind(std::filesystem::file_type t) noexcept {
    switch (t) {
      case std::filesystem::file_type::regular: return "a file";
      case std::filesystem::file_type::directory: return "a directory";
      case std::filesystem::file_type::fifo: return "a FIFO";
      case std::filesystem::file_type::socket: return "a socket";
      case std::filesystem::file_type::character: return "a character device";
      case std::filesystem::file_type::block: return "a block device";
      case std::filesystem::file_type::symlink: return "a symbolic link";
      default: return "not a directory";
    }
  }

  std::string dir_;
};

}  // namespace v0
}  // namespace sparsepush
