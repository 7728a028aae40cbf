// sparsepush/train/run_directories.hpp: the checkpoint and resume directories of one run, as the
// trainer opens them: checked on every process, locked by rank 0 (every rank shares them), the
// resume directory's manifest checked against the run, and the round to resume at agreed; a
// checkpoint committed (every rank's file, then the manifest, then the older files removed); and
// a failure on any process made an error on every process, so that none waits for one that gave up.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <span>
#include <string>
#include <system_error>

#include "../checkpoint.hpp"
#include "checkpoints.hpp"
#include "process_group.hpp"
#include "settings.hpp"
#include "trainer_checkpoint.hpp"
#include "types.hpp"

namespace sparsepush {
inline namespace v0 {
namespace detail {

/// Collective: whether any process failed (`failed` holds this process's error, if any).
template <process_group G>
bool any_failed(G& group, const std::exception_ptr& failed) {
  return detail::sum(group, std::uint64_t{failed ? 1u : 0u}, "the check that every rank can start") > 0;
}

/// Whether paths a and b name the same directory.
inline bool same_directory(const std::string& a, const std::string& b) {
  if (a == b) return true;
  std::error_code ec;
  const bool same = std::filesystem::equivalent(a, b, ec);
  return !ec && same;
}

/// The directories of one run and rank 0's locks on them, from open() to release().
class run_directories {
 public:
  /// Collective: the round the run starts at. Every process checks that the resume directory
  /// exists (resume never creates one) and that it can write checkpoints; rank 0 locks the
  /// directories and, with opt.resume_dir, reads the manifest and checks it against this run:
  /// settings first, then the rank count, then the round and its files. A failure on any process
  /// is an error on every process (its own message where it failed).
  template <process_group G>
  std::uint32_t open(G& group, const run_settings& settings, const trainer_options& opt) {
    std::uint32_t round = 0;
    std::exception_ptr failed;
    try {
      if (!opt.resume_dir.empty()) checkpoint_directory(opt.resume_dir).require_existing("resume");
      if (!opt.checkpoint_dir.empty()) checkpoint_directory(opt.checkpoint_dir).prepare();
      same_dir_ = !opt.resume_dir.empty() && same_directory(opt.resume_dir, opt.checkpoint_dir);
      if (group.rank() == 0) {
        if (!opt.checkpoint_dir.empty()) ckpt_lock_ = checkpoint_directory(opt.checkpoint_dir).lock();
        if (!opt.resume_dir.empty() && !same_dir_) resume_lock_ = checkpoint_directory(opt.resume_dir).lock();
        if (!opt.resume_dir.empty())
          round = check_manifest(checkpoint_directory(opt.resume_dir).read_manifest(), settings, group.ranks(), opt);
      }
    } catch (...) {
      failed = std::current_exception();
    }
    if (any_failed(group, failed)) fail_everywhere(failed, "cannot start the run");
    start_ = detail::broadcast(group, round, "the broadcast of the round to resume at");
    return start_;
  }

  /// Collective: this process's rank file of round `next` (`bytes`) into directory `dir`; then,
  /// every rank's file written, rank 0 moves the manifest on, and each rank removes its files
  /// older than the previous checkpoint `prev`, except the round this run resumed from when it
  /// checkpoints into the directory it resumed from.
  template <process_group G>
  void commit(G& group, const run_settings& settings, const std::string& dir, std::uint32_t next, std::uint32_t prev,
              std::span<const std::byte> bytes) const {
    const checkpoint_directory d(dir);
    write_file_atomic(d.rank_file(next, group.rank()), bytes);
    group.agree("checkpoint round " + std::to_string(next));  // every rank's file is written
    if (group.rank() == 0) d.write_manifest({next, static_cast<std::uint32_t>(group.ranks()), settings.text()});
    d.remove_older(prev, group.rank(), same_dir_ ? start_ : 0);
  }

  /// Give the locks up.
  void release() noexcept {
    ckpt_lock_.release();
    resume_lock_.release();
  }

  /// After any_failed(): release the locks and throw on every process, its own error where it has
  /// one, so that no process waits in a collective call for one that gave up.
  [[noreturn]] void fail_everywhere(const std::exception_ptr& failed, const std::string& what) {
    release();
    if (failed) std::rethrow_exception(failed);
    throw checkpoint_error(what + ": another rank failed (see its error); nothing was changed");
  }

 private:
  checkpoint_lock ckpt_lock_, resume_lock_;  ///< rank 0's
  bool same_dir_ = false;                    ///< checkpoints go to the directory resumed from
  std::uint32_t start_ = 0;                  ///< the round the run started at
};

}  // namespace detail
}  // namespace v0
}  // namespace sparsepush
