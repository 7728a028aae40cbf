// sparsepush/train/csv_log.hpp: a run's CSV log, one row per evaluation (round, epoch, phase,
// loss, both test accuracies, divergence, bytes, communication ratio, wall seconds; the averaged
// model's accuracy and the divergence are empty where that evaluation did not measure them). A resumed
// run keeps the rows up to its checkpoint. Every write is checked.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "outputs.hpp"
#include "trainer.hpp"

namespace sparsepush {
inline namespace v0 {

/// The CSV log: one row per evaluation; a resumed run keeps the rows up to its checkpoint. Every
/// write is checked: the first failure is kept (error()) and the log given up, the run goes on.
class csv_log {
 public:
  /// Start the log (a resumed run: its rows up to resume_round, written to PATH.part and renamed
  /// over PATH only once complete, so a failure leaves the old log whole). False: see error().
  bool open(const std::string& path, std::uint32_t resume_round) {
    std::vector<std::string> kept;
    if (resume_round > 0) {
      std::ifstream old(path);
      std::string line;
      for (bool first = true; std::getline(old, line); first = false)
        if (!first && std::strtoull(line.c_str(), nullptr, 10) <= resume_round) kept.push_back(line);
    }
    const std::string part = resume_round > 0 ? path + ".part" : path;
    if (!f_.open(part, "the log file", resume_round > 0)) return false;
    f_.write("round,epoch,phase,loss,avg_test_accuracy,averaged_model_test_accuracy,param_divergence,bytes_sent,mb_sent,"
             "comm_ratio,wall_seconds\n");
    for (const auto& line : kept) f_.write(line + '\n');
    f_.flush();
    std::error_code ec;
    if (resume_round > 0 && !f_.is_open()) std::filesystem::remove(part, ec);  // the old log stays whole
    if (resume_round > 0 && f_.is_open()) {
      std::filesystem::rename(part, path, ec);
      if (ec) {
        f_.close();
        std::filesystem::remove(part, ec);
        error_ = "cannot write the log file " + path + ": cannot rename " + part + " over it";
        return false;
      }
    }
    return f_.is_open();
  }
  /// True while the log file is open.
  bool is_open() const { return f_.is_open(); }
  /// Appends the row of evaluation s: round, epoch, phase name, loss, node-mean accuracy, averaged
  /// model accuracy and divergence (empty where not measured), bytes, megabytes, communication ratio,
  /// wall seconds. A failed write is kept for close() and error().
  void row(const round_status& s, double epoch, const char* phase) {
    std::ostringstream o;
    o << s.round << ',' << epoch << ',' << phase << ',' << s.loss << ',' << s.eval.avg_node_accuracy << ',';
    if (s.eval.averaged) o << s.eval.averaged_model_accuracy << ',' << s.report.parameter_divergence;
    else o << ',';  // not measured at this evaluation (each node's own model only): empty cells
    o << ',' << s.report.bytes_sent << ',' << static_cast<double>(s.report.bytes_sent) / 1e6 << ',' << s.report.comm_ratio
      << ',' << s.wall_seconds << '\n';
    f_.write(o.str());
  }
  /// Flushes the rows written so far (a failure is kept for close() and error()).
  void flush() { f_.flush(); }
  /// Close; false when any write failed (error() names the file and the cause).
  bool close() { return f_.close() && error_.empty(); }
  /// The first failure, naming the file and its cause ("" when none).
  std::string error() const { return error_.empty() ? f_.error() : error_; }

 private:
  output_file f_;
  std::string error_;
};

}  // namespace v0
}  // namespace sparsepush
