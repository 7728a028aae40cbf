// Checks that every "// [readme-NAME-begin]" ... "// [readme-NAME-end]" block of the given
// example sources appears verbatim (less its common indentation) in README.md, so the README's
// code is code that compiles. Usage: check_readme_snippets README.md example.cpp...
#include <fstream>
#include <iostream>
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
}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::cerr << "usage: check_readme_snippets README.md source...\n";
    return 2;
  }
  try {
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
  } catch (const std::exception& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
}
