// Must NOT compile: sparse_push over a compressor type that has no compress(). The test checks
// that the diagnostic names the missing member (see tests/CMakeLists.txt).
#include <sparsepush/algorithm/sparse_push.hpp>

struct bad_compressor {  // squeeze() is not compress()
  void squeeze(std::span<const float>, sparsepush::message&, const sparsepush::context&) const {}
};

int main() {
  namespace sp = sparsepush;
  std::vector<std::vector<float>> x0(4, std::vector<float>(8, 1.0f));
  sp::basic_phase_schedule<bad_compressor> phases({sp::basic_phase<bad_compressor>{}});
  sp::sparse_push<float, bad_compressor> alg(x0, sp::parse_schedule("exponential", 4), phases);
  return static_cast<int>(alg.num_nodes());
}
