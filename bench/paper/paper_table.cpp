// sparsepush-paper-table: the papers' comparison table from sparsepush-train summaries.
// Reads RUNS.tsv (one line a run: label, skew, seed, summary file relative to RUNS.tsv's folder;
// written by bench/paper/run.sh), averages each (label, skew) over its seeds and writes, into OUT:
//   table.md             mean ± half the range over seeds, then the papers' claims checked
//   accuracy_vs_mb.dat   one point a run (gnuplot data, one block a skew), accuracy_vs_mb.gp and
//   accuracy_vs_mb.png   node-average accuracy against MB sent per node (gnuplot pngcairo)
// A missing or unreadable summary, or a missing key, is "—", never an error.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sparsepush/train/plot.hpp>

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

/// One run as RUNS.tsv names it, and its summary when it could be read.
struct run {
  std::string label, skew, seed, file;
  std::optional<json> summary;
};

/// A number at a '/'-separated path of nested keys, or nothing when a key is missing or not a number.
std::optional<double> number(const json& j, const std::string& path) {
  const json* at = &j;
  std::size_t from = 0;
  while (from <= path.size()) {
    const std::size_t to = std::min(path.find('/', from), path.size());
    const std::string key = path.substr(from, to - from);
    if (!at->is_object() || !at->contains(key)) return std::nullopt;
    at = &(*at)[key];
    from = to + 1;
  }
  if (!at->is_number()) return std::nullopt;
  return at->get<double>();
}

/// The estimated energy: compute plus communication joules, when the summary has both.
std::optional<double> energy(const json& j) {
  const auto compute = number(j, "device_profile/compute_energy_joules_total");
  const auto comm = number(j, "device_profile/communication_energy_joules");
  if (!compute || !comm) return std::nullopt;
  return *compute + *comm;
}

/// Mean and spread (half the range, max - min over 2: for two seeds, half their difference) of
/// the values present, and how many there were.
struct seed_stats {
  double mean = 0, spread = 0;
  std::size_t count = 0;
};
seed_stats stats(const std::vector<double>& v) {
  seed_stats s;
  s.count = v.size();
  if (v.empty()) return s;
  double sum = 0;
  for (double x : v) sum += x;
  s.mean = sum / static_cast<double>(v.size());
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  s.spread = (*hi - *lo) / 2;
  return s;
}

/// A skew as a number (RUNS.tsv holds text), or nothing when it is not one.
std::optional<double> skew_value(const std::string& s) {
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}
bool same_skew(const std::string& a, const std::string& b) {
  const auto x = skew_value(a), y = skew_value(b);
  return x && y ? *x == *y : a == b;
}

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

/// "mean ± spread" in `fmt` (after scaling by `scale`), the mean alone for one seed, "—" for none.
std::string cell(const seed_stats& s, const char* fmt, double scale = 1) {
  if (s.count == 0) return "—";
  std::string out = format(fmt, s.mean * scale);
  if (s.count > 1) out += " ± " + format(fmt, s.spread * scale);
  return out;
}

/// One row of the table: a (label, skew) and its runs, in RUNS.tsv's order.
struct row {
  std::string label, skew;
  std::vector<const run*> runs;
  /// The statistics of one number over the seeds whose summary has it.
  seed_stats of(const std::string& path) const {
    std::vector<double> v;
    for (const run* r : runs)
      if (r->summary)
        if (auto x = number(*r->summary, path)) v.push_back(*x);
    return stats(v);
  }
  seed_stats of_energy() const {
    std::vector<double> v;
    for (const run* r : runs)
      if (r->summary)
        if (auto x = energy(*r->summary)) v.push_back(*x);
    return stats(v);
  }
  std::size_t seeds_read() const {
    return static_cast<std::size_t>(std::count_if(runs.begin(), runs.end(), [](const run* r) { return r->summary.has_value(); }));
  }
};

const char* usage =
    "usage: sparsepush-paper-table RUNS.tsv OUT_DIR [--note LINE]...\n"
    "  RUNS.tsv: one line a run, tab-separated: label, skew, seed, summary JSON (relative to RUNS.tsv's folder)\n"
    "  writes OUT_DIR/table.md, accuracy_vs_mb.dat, accuracy_vs_mb.gp and accuracy_vs_mb.png (gnuplot);\n"
    "  each --note LINE goes under table.md's title\n";

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc), notes, positional;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--help" || args[i] == "-h") {
      std::printf("%s", usage);
      return 0;
    }
    if (args[i] == "--note") {
      if (i + 1 == args.size()) {
        std::fprintf(stderr, "sparsepush-paper-table: --note needs a line\n%s", usage);
        return 2;
      }
      notes.push_back(args[++i]);
    } else {
      positional.push_back(args[i]);
    }
  }
  if (positional.size() != 2) {
    std::fprintf(stderr, "%s", usage);
    return 2;
  }
  const fs::path runs_file = positional[0], out_dir = positional[1];
  std::ifstream in(runs_file);
  if (!in) {
    std::fprintf(stderr, "sparsepush-paper-table: cannot read %s\n", runs_file.c_str());
    return 2;
  }

  // The runs, in file order; each summary read when it exists and parses.
  std::vector<run> runs;
  std::string line;
  std::size_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, '\t');) f.push_back(x);
    if (f.size() != 4) {
      std::fprintf(stderr, "sparsepush-paper-table: %s:%zu: expected 4 tab-separated fields, found %zu; line skipped\n",
                   runs_file.c_str(), line_no, f.size());
      continue;
    }
    run r{f[0], f[1], f[2], f[3], std::nullopt};
    const fs::path p = fs::path(r.file).is_absolute() ? fs::path(r.file) : runs_file.parent_path() / r.file;
    if (std::ifstream s{p}) {
      try {
        r.summary = json::parse(s);
      } catch (const json::exception& e) {
        std::fprintf(stderr, "sparsepush-paper-table: %s does not parse (%s); counted as missing\n", p.c_str(), e.what());
      }
    }
    runs.push_back(std::move(r));
  }

  // Rows: each (label, skew) in order of first appearance.
  std::vector<row> rows;
  for (const run& r : runs) {
    auto it = std::find_if(rows.begin(), rows.end(), [&](const row& w) { return w.label == r.label && w.skew == r.skew; });
    if (it == rows.end()) it = rows.insert(rows.end(), row{r.label, r.skew, {}});
    it->runs.push_back(&r);
  }
  auto find = [&](const std::string& label, const std::string& skew) -> const row* {
    for (const row& w : rows)
      if (w.label == label && same_skew(w.skew, skew)) return &w;
    return nullptr;
  };

  std::error_code ec;
  fs::create_directories(out_dir, ec);
  std::ofstream md(out_dir / "table.md");
  if (!md) {
    std::fprintf(stderr, "sparsepush-paper-table: cannot write %s\n", (out_dir / "table.md").c_str());
    return 2;
  }
  md << "# Sparse-Push / SCSP against the baselines on Fashion-MNIST\n\n";
  for (const auto& n : notes) md << n << "  \n";
  md << "\nEach cell is the mean over the seeds read ± half their range ((max - min) / 2: half the difference of "
        "two seeds); one seed shows its value alone; — is a missing run or key. Accuracies are in percent at the final "
        "evaluation: node average (`avg_test_accuracy`) and the averaged model "
        "(`averaged_model_test_accuracy`). Energy is the summary's compute plus communication joules.\n\n";
  md << "| algorithm | skew | seeds read | node-avg acc % | avg-model acc % | divergence | MB sent / node | comm ratio | "
        "train s | energy J | final rounds |\n";
  md << "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n";
  for (const row& w : rows) {
    md << "| " << w.label << " | " << w.skew << " | " << w.seeds_read() << " | "
       << cell(w.of("avg_test_accuracy"), "%.2f", 100) << " | "
       << cell(w.of("averaged_model_test_accuracy"), "%.2f", 100) << " | " << cell(w.of("param_divergence"), "%.3g")
       << " | " << cell(w.of("bytes_per_node"), "%.3g", 1e-6) << " | " << cell(w.of("comm_ratio"), "%.1f") << " | "
       << cell(w.of("train_seconds"), "%.1f") << " | " << cell(w.of_energy(), "%.3g") << " | "
       << cell(w.of("final_rounds"), "%g") << " |\n";
  }

  // The papers' claims, from the node-average accuracy's means (percentage points).
  auto acc = [&](const std::string& label, const std::string& skew) -> std::optional<double> {
    const row* w = find(label, skew);
    if (!w) return std::nullopt;
    const seed_stats s = w->of("avg_test_accuracy");
    if (s.count == 0) return std::nullopt;
    return 100 * s.mean;
  };
  auto pts = [](double v) { return format("%.2f", v); };
  auto verdict = [](bool holds) { return holds ? "**holds**" : "**does not hold**"; };
  const char* skipped = "— (runs missing)";
  md << "\n## The papers' claims, measured\n\nFrom the node-average accuracy (means over seeds, percentage points).\n\n";
  {  // (a) compression costs more under skew
    const auto g0 = acc("SGP", "0"), s0 = acc("SP top-1%", "0"), g8 = acc("SGP", "0.8"), s8 = acc("SP top-1%", "0.8");
    md << "- (a) Compression costs more under skew (SP top-1% below SGP, skew 0.8 against skew 0): ";
    if (g0 && s0 && g8 && s8) {
      const double d0 = *g0 - *s0, d8 = *g8 - *s8;
      md << "drop " << pts(d8) << " at skew 0.8 against " << pts(d0) << " at skew 0: " << verdict(d8 > d0) << "\n";
    } else {
      md << skipped << "\n";
    }
  }
  {  // (b) SCSP recovers most of the skew loss
    const auto g = acc("SGP", "0.8"), s = acc("SP top-1%", "0.8"), c = acc("SCSP top-1%", "0.8");
    md << "- (b) SCSP recovers most of SP's loss at skew 0.8, (SCSP - SP) / (SGP - SP) >= 0.5: ";
    if (g && s && c) {
      md << "SGP " << pts(*g) << ", SP " << pts(*s) << ", SCSP " << pts(*c) << ": ";
      if (*g - *s > 0) {
        const double r = (*c - *s) / (*g - *s);
        md << "recovered " << format("%.2f", r) << ": " << verdict(r >= 0.5) << "\n";
      } else {
        md << "SP is not below SGP, nothing to recover: " << verdict(false) << "\n";
      }
    } else {
      md << skipped << "\n";
    }
  }
  // (c), (d): a low-precision label against fp32 SGP with the same model, at every skew measured
  auto precision_claim = [&](const char* name, const std::string& label, double limit, bool at_limit_holds,
                             const std::string& base_label = "SGP range-evonorm") {
    md << name;
    std::vector<std::string> skews;
    for (const row& w : rows)
      if (w.label == label && std::find(skews.begin(), skews.end(), w.skew) == skews.end()) skews.push_back(w.skew);
    bool any = false, holds = true;
    for (const auto& k : skews) {
      const auto base = acc(base_label, k), low = acc(label, k);
      if (!base || !low) continue;
      const double drop = *base - *low;
      md << (any ? "; " : "") << "skew " << k << ": " << pts(*low) << " against " << pts(*base) << ", drop "
         << pts(drop);
      any = true;
      holds = holds && (drop < limit || (at_limit_holds && drop == limit));
    }
    md << (any ? std::string(": ") + verdict(holds) : std::string(skipped)) << "\n";
  };
  precision_claim("- (c) 8-bit training costs under 1 point (8-bit SGP against fp32 SGP range-evonorm): ", "8-bit SGP", 1, false);
  precision_claim("- (d) 8-bit training with SP top-1% costs 1-2 points, so at most 2 (8-bit SP top-1% against fp32 "
                  "SGP range-evonorm): ",
                  "8-bit SP top-1%", 2, true);
  precision_claim("- (d') the 8-bit part of (d) alone, under 1 point (8-bit SP top-1% against fp32 SP top-1% "
                  "range-evonorm): ",
                  "8-bit SP top-1%", 1, false, "SP top-1% range-evonorm");
  // (e) beyond the papers: SCSP with auto bf16 final rounds keeps >= 40x total compression and
  // stays within 1 point of SCSP with exact (fp32) final rounds, at every skew measured
  md << "- (e) SCSP with auto bf16 final rounds keeps a comm ratio >= 40 and ends within 1 point of SCSP with "
        "10 exact final rounds (SCSP auto+bf16 against SCSP top-1%): ";
  {
    bool any = false, holds = true;
    for (const row& w : rows) {
      if (w.label != "SCSP auto+bf16") continue;
      const auto cheap = acc("SCSP auto+bf16", w.skew), full = acc("SCSP top-1%", w.skew);
      const seed_stats ratio = w.of("comm_ratio");
      if (!cheap || !full || ratio.count == 0) continue;
      const double drop = *full - *cheap;
      md << (any ? "; " : "") << "skew " << w.skew << ": " << pts(*cheap) << " against " << pts(*full) << ", drop "
         << pts(drop) << ", comm ratio " << format("%.1f", ratio.mean);
      any = true;
      holds = holds && drop < 1 && ratio.mean >= 40;
    }
    md << (any ? std::string(": ") + verdict(holds) : std::string(skipped)) << "\n";
  }
  md.close();

  // The plot: one point a run read, one data block (and one panel) a skew.
  std::vector<std::string> skews;
  for (const run& r : runs)
    if (std::find(skews.begin(), skews.end(), r.skew) == skews.end()) skews.push_back(r.skew);
  const fs::path dat = out_dir / "accuracy_vs_mb.dat", gp = out_dir / "accuracy_vs_mb.gp",
                 png = out_dir / "accuracy_vs_mb.png";
  std::ofstream d(dat);
  d << "# MB sent per node, node-average accuracy %, averaged-model accuracy %, seed, label; one block a skew\n";
  std::size_t block = 0, points = 0;
  for (const auto& k : skews) {
    if (block++) d << "\n\n";
    d << "# skew " << k << "\n";
    for (const run& r : runs) {
      if (r.skew != k || !r.summary) continue;
      const auto mb = number(*r.summary, "bytes_per_node"), a = number(*r.summary, "avg_test_accuracy");
      const auto m = number(*r.summary, "averaged_model_test_accuracy");
      if (!mb || !a || *mb <= 0) continue;
      std::string label = r.label;
      std::replace(label.begin(), label.end(), '"', '\'');
      d << format("%.6g", *mb / 1e6) << ' ' << format("%.4f", 100 * *a) << ' '
        << (m ? format("%.4f", 100 * *m) : std::string("NaN")) << ' ' << r.seed << " \"" << label << "\"\n";
      ++points;
    }
    d << "NaN NaN NaN 0 \"\"\n";  // a block gnuplot can always plot, also with no run read
  }
  d.close();
  // The file names reach gnuplot as data (ARG1, ARG2 of `gnuplot -c`); the panel titles are skews as numbers.
  std::ofstream g(gp);
  g << "# sparsepush-paper-table: gnuplot -c THIS_FILE accuracy_vs_mb.dat accuracy_vs_mb.png\n"
    << "set terminal pngcairo size " << 700 * std::max<std::size_t>(1, skews.size()) << ",650\nset output ARG2\n"
    << "set multiplot layout 1," << std::max<std::size_t>(1, skews.size())
    << " title 'Fashion-MNIST: node-average test accuracy against traffic'\n"
    << "set logscale x\nset xlabel 'MB sent per node (log)'\nset ylabel 'node-average test accuracy (%)'\n"
    << "set grid\nunset key\nset offsets graph 0.08, graph 0.15, graph 0.1, graph 0.1\n";
  for (std::size_t i = 0; i < skews.size(); ++i)
    g << "set title 'skew " << (skew_value(skews[i]) ? format("%g", *skew_value(skews[i])) : std::string("?")) << "'\n"
      << "plot ARG1 index " << i << " using 1:2 with points pt 7 ps 1.2, '' index " << i
      << " using 1:2:5 with labels font ',8' offset 0,0.8\n";
  g << "unset multiplot\n";
  g.close();
  std::printf("table written to %s\n", (out_dir / "table.md").c_str());
  if (points == 0) {
    std::fprintf(stderr, "sparsepush-paper-table: no run read; no plot\n");
    return 0;
  }
  if (sparsepush::run_program({"gnuplot", "-c", gp.string(), dat.string(), png.string()}) != 0)
    std::fprintf(stderr, "sparsepush-paper-table: gnuplot failed; the plot script is %s (gnuplot -c it with the data "
                 "file and the PNG)\n", gp.c_str());
  else
    std::printf("plot written to %s\n", png.c_str());
  return 0;
}
