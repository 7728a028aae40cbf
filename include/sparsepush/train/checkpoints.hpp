// sparsepush/train/checkpoints.hpp: a run's checkpoint directory. DIR/manifest names the last
// complete checkpoint (its round, the ranks that wrote it and the run's settings); each rank K
// writes its nodes to DIR/round-R.rank-K.ckpt, and the manifest moves on only after every rank
// has written, so a crash at any point leaves the previous checkpoint whole.
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

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

/// Paths and files of one checkpoint directory.
class checkpoint_directory {
 public:
  explicit checkpoint_directory(std::string dir) : dir_(std::move(dir)) {}
  const std::string& path() const noexcept { return dir_; }

  /// Create the directory if missing and check that files can be written there (config_error,
  /// naming it as `what`: "the --checkpoint directory" in a command-line program).
  void prepare(const std::string& what = "the checkpoint directory") const {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (!std::filesystem::is_directory(dir_))
      throw config_error("cannot create " + what + " " + dir_ + (ec ? ": " + ec.message() : std::string()));
    const std::string probe = dir_ + "/.write-probe";
    {
      std::ofstream p(probe);
      if (!p) throw config_error("cannot write in " + what + " " + dir_);
    }
    std::filesystem::remove(probe, ec);
  }
  bool has_manifest() const { return std::filesystem::exists(dir_ + "/manifest"); }

  /// The file rank `rank` writes for the checkpoint of round `round`.
  std::string rank_file(std::uint32_t round, int rank) const {
    return dir_ + "/round-" + std::to_string(round) + ".rank-" + std::to_string(rank) + ".ckpt";
  }

  void write_manifest(const checkpoint_manifest& m) const {
    checkpoint_writer w;
    w.section("MANI");
    w.u32(m.round);
    w.u32(m.ranks);
    w.str(m.settings);
    write_file_atomic(dir_ + "/manifest", w.finish());
  }
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

  /// Remove rank `rank`'s files of rounds before `round` (the checkpoints a newer one replaced).
  void remove_older(std::uint32_t round, int rank) const {
    std::error_code ec;
    for (const auto& f : std::filesystem::directory_iterator(dir_, ec)) {
      const std::string name = f.path().filename().string();
      unsigned long r = 0;
      int k = -1;
      if (std::sscanf(name.c_str(), "round-%lu.rank-%d.ckpt", &r, &k) == 2 && k == rank && r < round)
        std::filesystem::remove(f.path(), ec);
    }
  }

 private:
  std::string dir_;
};

}  // namespace v0
}  // namespace sparsepush
