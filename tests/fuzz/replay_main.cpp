// The main of a fuzz target built without libFuzzer (any compiler): run LLVMFuzzerTestOneInput
// on the empty input (as libFuzzer does first), then once on every file named on the command
// line or found in a directory named there (sorted, dot files skipped), so that ctest replays
// the seed corpus and every crash ever found. A finding aborts. A missing directory is reported
// and skipped, so that a new target needs no corpus to start with.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace fs = std::filesystem;

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE_OR_DIR...\n", argv[0]);
    return 2;
  }
  LLVMFuzzerTestOneInput(nullptr, 0);
  std::size_t total = 0;
  for (int a = 1; a < argc; ++a) {
    const fs::path arg(argv[a]);
    std::vector<fs::path> files;
    if (fs::is_directory(arg)) {
      for (const auto& entry : fs::directory_iterator(arg))
        if (entry.is_regular_file() && entry.path().filename().string().front() != '.')
          files.push_back(entry.path());
      std::sort(files.begin(), files.end());
    } else if (fs::is_regular_file(arg)) {
      files.push_back(arg);
    } else if (!fs::exists(arg)) {
      std::printf("%s: missing, skipped\n", argv[a]);
      continue;
    } else {
      std::fprintf(stderr, "%s: not a file or directory\n", argv[a]);
      return 1;
    }
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      const std::vector<char> bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "%s: cannot read\n", f.string().c_str());
        return 1;
      }
      std::fprintf(stderr, "replay %s (%zu bytes)\n", f.string().c_str(), bytes.size());
      std::vector<std::uint8_t> copy(bytes.begin(), bytes.end());  // exactly size bytes, as libFuzzer
      LLVMFuzzerTestOneInput(copy.data(), copy.size());
    }
    std::printf("%s: %zu inputs\n", argv[a], files.size());
    total += files.size();
  }
  std::printf("replayed the empty input and %zu files without a finding\n", total);
  return 0;
}
