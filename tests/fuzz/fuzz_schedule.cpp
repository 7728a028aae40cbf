// Fuzz target: parse_schedule(spec, n, seed). A spec is refused with a schedule_error, or the
// schedule has n nodes and, in every round checked (the first period, its wrap-around, and
// rounds far beyond it, where a 32-bit round counter would wrap), every column of W is what
// validate.hpp promises: the sender's self-edge with a positive share, receivers in range and
// distinct, shares finite in [0, 1] summing to 1 within column_sum_tolerance. W(t) = W(t mod P)
// for a periodic schedule; in_edges (row i of W) is the transpose of the columns, and the
// generic in_edges_of (derived from out_edges alone) agrees with it.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include <sparsepush/topology/parse.hpp>
#include <sparsepush/topology/validate.hpp>

#include "fuzz_common.hpp"
#include "fuzz_inputs.hpp"

namespace {

using namespace sparsepush;

/// The schedule seen through out_edges only, so that in_edges_of takes its generic path.
struct columns_only {
  const any_schedule* s;
  std::size_t num_nodes() const { return s->num_nodes(); }
  std::size_t period() const { return s->period(); }
  void out_edges(std::uint64_t round, std::uint32_t node, std::vector<out_edge>& out) const {
    s->out_edges(round, node, out);
  }
};
static_assert(schedule<columns_only> && !schedule_with_in_edges<columns_only>);

void check_round(const any_schedule& s, std::uint64_t t) {
  const std::size_t n = s.num_nodes();
  const std::size_t p = s.period();
  std::vector<std::vector<in_edge>> rows(n);  // the transpose, built naively, ascending sender
  std::vector<out_edge> col, col_mod;
  for (std::uint32_t j = 0; j < n; ++j) {
    s.out_edges(t, j, col);
    double sum = 0.0, self = 0.0;
    std::vector<char> seen(n, 0);
    for (const auto& e : col) {
      SPARSEPUSH_FUZZ_CHECK(e.to < n);
      SPARSEPUSH_FUZZ_CHECK(!seen[e.to]);
      seen[e.to] = 1;
      SPARSEPUSH_FUZZ_CHECK(std::isfinite(e.share) && e.share >= 0.0 && e.share <= 1.0 + column_sum_tolerance);
      if (e.to == j) self = e.share;
      sum += e.share;
      rows[e.to].push_back(in_edge{j, e.share});
    }
    SPARSEPUSH_FUZZ_CHECK(self > 0.0);
    SPARSEPUSH_FUZZ_CHECK(std::abs(sum - 1.0) <= column_sum_tolerance);
    if (p > 0) {
      s.out_edges(t % p, j, col_mod);
      SPARSEPUSH_FUZZ_CHECK(col == col_mod);
    }
  }
  const columns_only generic{&s};
  std::vector<in_edge> row, row_generic;
  for (std::uint32_t i = 0; i < n; ++i) {
    s.in_edges(t, i, row);
    SPARSEPUSH_FUZZ_CHECK(row == rows[i]);
    in_edges_of(generic, t, i, row_generic);
    SPARSEPUSH_FUZZ_CHECK(row_generic == rows[i]);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = sparsepush_fuzz::schedule_input::read({data, size});
  std::optional<any_schedule> parsed;
  try {
    parsed.emplace(parse_schedule(in.spec, in.n, in.seed));
  } catch (const schedule_error&) {
    return 0;
  }
  const any_schedule& s = *parsed;
  SPARSEPUSH_FUZZ_CHECK(s.num_nodes() == in.n);
  const std::uint64_t p = s.period();
  for (const std::uint64_t t : {std::uint64_t{0}, std::uint64_t{1}, p + 1, 2 * p + 1, std::uint64_t{1000003},
                                std::uint64_t{0xFFFFFFFFu}, std::uint64_t{0x100000000u}, std::uint64_t{0x100000001u},
                                (std::uint64_t{1} << 63) + 5})
    check_round(s, t);
  for (std::uint64_t t = 2; t < std::min<std::uint64_t>(p, 64); ++t) check_round(s, t);
  return 0;
}
