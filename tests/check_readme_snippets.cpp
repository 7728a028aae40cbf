// Keeps README.md true to the code, in two modes.
//   check_readme_snippets README.md example.cpp...
//     Every "// [readme-NAME-begin]" ... "// [readme-NAME-end]" block of the given example sources
//     appears verbatim (less its common indentation) in README.md, so the README's code compiles.
//   check_readme_snippets --cli-defaults README.md path/to/sparsepush-train
//     Every default of sparsepush-train that README.md states (the claims below) is the
//     program's: the defaults `--help` prints, and those it resolves when it runs (schedule, eta),
//     which a short run prints on its first line.
#include <cctype>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace {
std::string read_file(const char* path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(std::string("cannot read ") + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int check_snippets(int argc, char** argv) {
  const std::string readme = read_file(argv[1]);
  int found = 0, missing = 0;
  for (int a = 2; a < argc; ++a) {
    std::istringstream src(read_file(argv[a]));
    std::string line, name, block;
    std::size_t indent = 0;
    bool first = false;
    while (std::getline(src, line)) {
      const auto b = line.find("// [readme-");
      if (b != std::string::npos && line.ends_with("-begin]")) {
        name = line.substr(b + 11, line.size() - b - 11 - 7);
        block.clear();
        first = true;
      } else if (!name.empty() && b != std::string::npos && line.ends_with("-end]")) {
        ++found;
        if (readme.find(block) == std::string::npos) {
          ++missing;
          std::cerr << "README.md lacks block [readme-" << name << "] of " << argv[a] << ":\n"
                    << block;
        }
        name.clear();
      } else if (!name.empty()) {
        if (first) indent = line.find_first_not_of(' ');
        first = false;
        block += (line.size() >= indent ? line.substr(indent) : std::string()) + "\n";
      }
    }
  }
  std::cout << found << " example blocks, " << missing << " missing from README.md\n";
  return found > 0 && missing == 0 ? 0 : 1;
}

// --- README.md's defaults of sparsepush-train against the program's -------------------------

/// One default the README states: where it says it (group 1 of `readme`, matched ignoring case
/// against the README with its whitespace collapsed, so line wrapping does not matter) and where the program
/// says it (group 1 of `program`, matched against `--help` followed by a short run's output).
struct claim {
  const char* option;
  const char* readme;
  const char* program;
};

// Each README sentence below is checked against every source that states the same default.
// `--help` lines read "  --name TYPE[:CHECK]=DEFAULT"; the run's first line reads
// "sparsepush-train: ALG on N nodes, schedule S, compressor C, eta E, model M (...), skew K, ...".
const claim claims[] = {
    {"--nodes", R"(with its defaults: - (\d+) nodes train)", R"(\n *--nodes [^=\n]*=(\S+))"},
    {"--model", R"(nodes train the reference (\w+) on)", R"(\n *--model [^=\n]*=(\S+))"},
    {"--algorithm", R"(on fashion-mnist with (\w+) \()", R"(\n *--algorithm [^=\n]*=(\S+))"},
    {"--algorithm", R"(on fashion-mnist with (\w+) \()", R"(sparsepush-train: (\w+) on \d+ nodes, )"},
    {"--compressor", R"(with \w+ \((top-[\d.]+%), eta)", R"(\n *--compressor [^=\n]*=(\S+))"},
    {"--compressor", R"(with \w+ \((top-[\d.]+%), eta)", R"(, compressor ([^, ]+), eta )"},
    {"--eta", R"(\(top-[\d.]+%, eta ([\d.]+),)", R"(, compressor [^, ]+, eta ([^, ]+), )"},
    {"--final-rounds", R"(eta [\d.]+, (\w+) final gossip rounds)",
     R"(\n *--final-rounds [^=\n]*=(\S+))"},
    {"--schedule", R"(they communicate over the [^(;]*\(`([^`]+)`\);)", R"(\(default: ([^;)]+)[;)])"},
    {"--schedule", R"(they communicate over the [^(;]*\(`([^`]+)`\);)", R"(nodes, schedule ([^, ]+), )"},
    {"--skew", R"(label-skewed shard \(skew ([\d.]+)\))", R"(\n *--skew [^=\n]*=(\S+))"},
    {"--skew", R"(label-skewed shard \(skew ([\d.]+)\))", R"(\), skew ([^, ]+), )"},
    {"--epochs", R"(training runs for ([\d.]+) epochs)", R"(\n *--epochs [^=\n]*=(\S+))"},
    {"--eta (by compressor)", R"(no `--eta`, the default follows the compressor: (.*? for identity))",
     R"(default from the compressor: (.*? for identity))"},
    {"--per-layer", R"(top-k is (\w+) by default\. `--per-layer`)", R"(\n *--per-layer .* instead of (\w+))"},
    {"--data", R"(by default it uses debian's `dataset-fashion-mnist` under `([^`]+)`)",
     R"(\n *--data [^=\n]*=(\S+))"},
    {"--transport", R"(`--transport` is `(\w+)` by default)", R"(\n *--transport [^=\n]*=(\S+))"},
    {"--mpi-timeout", R"(waits `--mpi-timeout` seconds \(default (\d+)\))", R"(\n *--mpi-timeout [^=\n]*=(\S+))"},
    {"--loss-recovery", R"(picks the variant \(default `(\w+)`;)", R"(\n *--loss-recovery [^=\n]*=(\S+))"},
    {"--drop-probability", R"(`--drop-probability` defaults to (\d+)\))", R"(\n *--drop-probability [^=\n]*=(\S+))"},
    {"--staleness", R"(`--staleness (\d+)`, lockstep, is the default)", R"(\n *--staleness [^=\n]*=(\S+))"},
    {"--jitter", R"(`--jitter F` \(default (\d+): none\))", R"(\n *--jitter [^=\n]*=(\S+))"},
    {"--checkpoint-every", R"(every `--checkpoint-every` rounds \((\d+), the\s+default)", R"(\n *--checkpoint-every [^=\n]*=(\S+))"},
};

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

/// Writes a value the way both sides can agree on: lower case, "top-1%" as "top-k:0.01", numbers
/// in %g ("5" and "5.0" agree), "a, b and c" as "a, b, c", whitespace collapsed.
std::string canonical(std::string s) {
  s = lower(s);
  std::smatch m;
  static const std::regex percent(R"(top-(\d+(?:\.\d+)?)%)");
  while (std::regex_search(s, m, percent)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "top-k:%g", std::stod(m[1].str()) / 100);
    s = m.prefix().str() + buf + m.suffix().str();
  }
  std::string out;
  static const std::regex number(R"(\d+(?:\.\d+)?(?:e[-+]?\d+)?)");
  std::string rest = s;
  while (std::regex_search(rest, m, number)) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", std::stod(m[0].str()));
    out += m.prefix().str() + buf;
    rest = m.suffix().str();
  }
  out += rest;
  out = std::regex_replace(out, std::regex(R"(,? and )"), ", ");
  return std::regex_replace(out, std::regex(R"(\s+)"), " ");
}

/// stdout and stderr of a shell command, and whether it exited with 0.
std::string run(const std::string& command, bool& ok) {
  std::FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) throw std::runtime_error("cannot run " + command);
  std::string out;
  char buf[4096];
  while (const std::size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  ok = pclose(p) == 0;
  return out;
}

int check_cli_defaults(const char* readme_path, const std::string& program) {
  const std::string readme = std::regex_replace(read_file(readme_path), std::regex(R"(\s+)"), " ");
  bool help_ok = false, run_ok = false;
  const std::string quoted = "'" + program + "'";
  const std::string help = run(quoted + " --help", help_ok);
  // Everything the README states stays at its default except what makes the run short.
  const std::string short_run =
      run(quoted + " --nodes 4 --model mlp --epochs 0.01 --final-rounds 1 --eval-samples 100", run_ok);
  if (!help_ok || !run_ok) {
    std::cerr << program << " failed:\n" << help << "\n" << short_run << "\n";
    return 1;
  }
  const std::string said = help + "\n" + short_run;
  int wrong = 0;
  for (const claim& c : claims) {
    std::smatch r, p;
    if (!std::regex_search(readme, r, std::regex(c.readme, std::regex::ECMAScript | std::regex::icase))) {
      std::cerr << "README.md no longer states the default of " << c.option << " as /" << c.readme
                << "/: update the claim in tests/check_readme_snippets.cpp\n";
      ++wrong;
    } else if (!std::regex_search(said, p, std::regex(c.program))) {
      std::cerr << "sparsepush-train no longer prints the default of " << c.option << " as /" << c.program
                << "/: update the claim in tests/check_readme_snippets.cpp\n";
      ++wrong;
    } else if (canonical(r[1].str()) != canonical(p[1].str())) {
      std::cerr << "README.md says the default of " << c.option << " is \"" << r[1].str()
                << "\", sparsepush-train says \"" << p[1].str() << "\"\n";
      ++wrong;
    } else {
      std::cout << c.option << ": " << p[1].str() << (p.position(0) < std::ssize(help) ? " (--help)\n" : " (run)\n");
    }
  }
  std::cout << std::size(claims) << " checks of the defaults README.md states, " << wrong << " wrong\n";
  return wrong == 0 ? 0 : 1;
}
}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 4 && std::string(argv[1]) == "--cli-defaults") return check_cli_defaults(argv[2], argv[3]);
    if (argc >= 3 && argv[1][0] != '-') return check_snippets(argc, argv);
    std::cerr << "usage: check_readme_snippets README.md source...\n"
                 "       check_readme_snippets --cli-defaults README.md path/to/sparsepush-train\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}
