// Must NOT compile: sparse_push (or, with -DSPARSEPUSH_TEST_CHOCO, choco) over a schedule type
// that has no out_edges(). The test checks that the diagnostic names the missing member (see
// tests/CMakeLists.txt).
#include <sparsepush/algorithm/choco.hpp>
#include <sparsepush/algorithm/sparse_push.hpp>

struct bad_schedule {  // a schedule answers out_edges(round, node, out); this one only counts
  std::size_t num_nodes() const { return 4; }
  std::size_t period() const { return 1; }
};

int main() {
  namespace sp = sparsepush;
  std::vector<std::vector<float>> x0(4, std::vector<float>(8, 1.0f));
#ifdef SPARSEPUSH_TEST_CHOCO
  sp::choco<float, sp::any_compressor, bad_schedule> alg(x0, bad_schedule{});
#else
  sp::sparse_push<float, sp::any_compressor, bad_schedule> alg(x0, bad_schedule{}, sp::sgp_phases());
#endif
  return static_cast<int>(alg.num_nodes());
}
