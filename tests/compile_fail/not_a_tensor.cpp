// Must NOT compile: a type with no tensor_traits reaches the library. The test checks that the
// diagnostic says what to specialize (see tests/CMakeLists.txt).
#include <sparsepush/tensor.hpp>
#include <vector>

int main() {
  std::vector<int> not_floats(4);
  auto s = sparsepush::as_span(not_floats);
  return static_cast<int>(s.size());
}
