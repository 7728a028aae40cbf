// Tests of sparsepush/topology/*: every built-in schedule is column stochastic with self-loops
// and strongly connected (checked on dense matrices here), its in-edges are the rows of the
// dense W, the exponential graphs reproduce SGP's peer offsets (computed independently, integer
// powers), and bad schedules are clear errors.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <sparsepush/sparsepush.hpp>

using namespace sparsepush;

namespace {
using dense = std::vector<std::vector<double>>;  // W[i][j]

template <class S>
dense dense_w(const S& s, std::uint64_t t) {
  const std::size_t n = s.num_nodes();
  dense w(n, std::vector<double>(n, 0.0));
  std::vector<out_edge> col;
  for (std::uint32_t j = 0; j < n; ++j) {
    s.out_edges(t, j, col);
    for (const auto& e : col) w[e.to][j] += e.share;
  }
  return w;
}

std::vector<std::string> all_specs(std::size_t n) {
  std::vector<std::string> s = {"directed-ring", "undirected-ring", "complete", "time-varying-ring",
                                "alternating-ring", "exponential", "bidirectional-exponential",
                                "random:1", "erdos-renyi:0.5"};
  if (n >= 3) s.push_back("exponential:2");
  if (n == 16) s.push_back("torus:4x4");
  if (n == 8) s.push_back("torus:2x4");
  return s;
}

/// Independent floor(log2(x)) from the bit width.
std::size_t ilog2(std::size_t x) { return static_cast<std::size_t>(std::bit_width(x)) - 1; }
}  // namespace

TEST_CASE("every built-in schedule is column stochastic, has self-loops and validates", "[topology]") {
  for (std::size_t n : {2u, 3u, 4u, 8u, 16u, 33u}) {
    for (const auto& spec : all_specs(n)) {
      INFO(spec << " n=" << n);
      const any_schedule s = parse_schedule(spec, n, 7);
      REQUIRE(s.num_nodes() == n);
      const std::size_t rounds = s.period() ? s.period() : 20;
      for (std::size_t t = 0; t < rounds; ++t) {
        const auto w = dense_w(s, t);
        for (std::size_t j = 0; j < n; ++j) {
          double col = 0;
          for (std::size_t i = 0; i < n; ++i) {
            REQUIRE(w[i][j] >= 0.0);
            col += w[i][j];
          }
          REQUIRE(std::abs(col - 1.0) < 1e-12);
          REQUIRE(w[j][j] > 0.0);
        }
        const bool symmetric_kind = spec == "undirected-ring" || spec == "complete" || spec.starts_with("torus");
        if (symmetric_kind)  // symmetric and doubly stochastic
          for (std::size_t i = 0; i < n; ++i) {
            double row = 0;
            for (std::size_t j = 0; j < n; ++j) {
              REQUIRE(w[i][j] == Approx(w[j][i]).margin(1e-15));
              row += w[i][j];
            }
            REQUIRE(std::abs(row - 1.0) < 1e-12);
          }
      }
    }
  }
}

namespace {
/// A user schedule that only knows its columns: it must still model `schedule`.
struct out_edges_only {
  const any_schedule* s = nullptr;
  std::size_t num_nodes() const { return s->num_nodes(); }
  std::size_t period() const { return s->period(); }
  void out_edges(std::uint64_t t, std::uint32_t node, std::vector<out_edge>& out) const {
    s->out_edges(t, node, out);
  }
};
static_assert(schedule<out_edges_only> && !schedule_with_in_edges<out_edges_only>);
static_assert(schedule_with_in_edges<any_schedule> && schedule_with_in_edges<periodic_schedule> &&
              schedule_with_in_edges<random_out_peers>);

/// Row i of the dense W: every sender with a nonzero share, ascending.
std::vector<in_edge> dense_row(const dense& w, std::size_t i) {
  std::vector<in_edge> row;
  for (std::size_t j = 0; j < w.size(); ++j)
    if (w[i][j] != 0.0) row.push_back({static_cast<std::uint32_t>(j), w[i][j]});
  return row;
}

/// Every spec the parser knows, with several arguments, that fits n nodes.
std::vector<std::string> in_edge_specs(std::size_t n) {
  std::vector<std::string> s = {"directed-ring", "undirected-ring", "complete", "time-varying-ring",
                                "alternating-ring", "exponential", "bidirectional-exponential",
                                "erdos-renyi:0.3", "erdos-renyi:0.7"};
  s.push_back(n == 2 ? "time-varying-ring:1,3" : "time-varying-ring:2,1," + std::to_string(n + 1));
  for (std::size_t k : {1u, 2u, 3u, 5u})
    if (k < n) {
      s.push_back("exponential:" + std::to_string(k));
      s.push_back("random:" + std::to_string(k));
    }
  s.push_back("torus:1x" + std::to_string(n));
  for (std::size_t r = 2; r * r <= n; ++r)
    if (n % r == 0) s.push_back("torus:" + std::to_string(r) + "x" + std::to_string(n / r));
  return s;
}

/// in_edges, in_edges_of on the schedule and on an out-edges-only view all equal the dense row.
void check_in_edges(const any_schedule& s, std::size_t rounds) {
  const std::size_t n = s.num_nodes();
  const out_edges_only view{&s};
  std::vector<in_edge> row, row_of, row_view;
  for (std::uint64_t t = 0; t < rounds; ++t) {
    const auto w = dense_w(s, t);
    for (std::uint32_t i = 0; i < n; ++i) {
      INFO("round " << t << ", node " << i);
      s.in_edges(t, i, row);
      in_edges_of(s, t, i, row_of);
      in_edges_of(view, t, i, row_view);
      const auto want = dense_row(w, i);
      REQUIRE(row == want);
      REQUIRE(row_of == want);
      REQUIRE(row_view == want);
    }
  }
  REQUIRE_THROWS_WITH(s.in_edges(0, static_cast<std::uint32_t>(n), row),
                      Catch::Contains("node " + std::to_string(n)));
  REQUIRE_THROWS_WITH(in_edges_of(view, 0, static_cast<std::uint32_t>(n), row),
                      Catch::Contains("node " + std::to_string(n)));
}
}  // namespace

TEST_CASE("in_edges of every built-in schedule are the rows of W", "[topology]") {
  for (std::size_t n : {2u, 3u, 5u, 8u, 16u, 33u})
    for (const auto& spec : in_edge_specs(n)) {
      INFO(spec << " n=" << n);
      const any_schedule s = parse_schedule(spec, n, 11);
      check_in_edges(s, s.period() ? 2 * s.period() + 4 : 21);
    }
}

TEST_CASE("in_edges of user graph schedules, sorted whatever the column order", "[topology]") {
  for (std::size_t n : {2u, 3u, 5u, 8u, 16u, 33u}) {
    INFO("n=" << n);
    // static: a ring with a few chords
    digraph g(n);
    for (std::size_t i = 0; i < n; ++i) {
      g.add_edge(i, (i + 1) % n);
      if (i % 3 == 0) g.add_edge(i, (i * 7 + 2) % n);
    }
    check_in_edges(static_schedule(g), 3);
    // time-varying: three graphs whose union is a ring in both directions
    std::vector<digraph> gs(3, digraph(n));
    for (std::size_t i = 0; i < n; ++i) {
      gs[i % 3].add_edge(i, (i + 1) % n);
      gs[(i + 1) % 3].add_edge((i + 1) % n, i);
    }
    check_in_edges(time_varying_schedule(gs), 10);
    // columns that list their receivers in descending order, self-edge last
    std::vector<std::vector<out_edge>> cols(n);
    for (std::size_t j = 0; j < n; ++j) {
      const double w = 1.0 / static_cast<double>(n);
      for (std::size_t i = n; i-- > 0;) cols[j].push_back({static_cast<std::uint32_t>(i), w});
    }
    check_in_edges(periodic_schedule({mixing_round::from_columns(cols)}), 2);
  }
}

TEST_CASE("in_edges: random out-peers recompute rows from the seed", "[topology]") {
  const random_out_peers s(12, 3, 5);
  std::vector<in_edge> row;
  std::vector<out_edge> col;
  for (std::uint64_t t : {0ull, 1ull, 1000ull, (1ull << 32) + 7}) {
    std::size_t edges = 0;
    for (std::uint32_t i = 0; i < 12; ++i) {
      s.in_edges(t, i, row);
      REQUIRE(row.size() >= 1);
      for (const auto& e : row) {
        s.out_edges(t, e.from, col);
        REQUIRE(std::count(col.begin(), col.end(), out_edge{i, 0.25}) == 1);
      }
      edges += row.size();
    }
    REQUIRE(edges == 12 * 4);  // every column's k + 1 entries appear in exactly one row each
  }
  REQUIRE_THROWS_WITH(s.in_edges(0, 12, row), Catch::Contains("node 12"));
}

TEST_CASE("one-peer exponential graph reproduces SGP's offsets (integer log)", "[topology]") {
  for (std::size_t n : {2u, 3u, 5u, 8u, 9u, 16u, 17u, 32u, 33u, 244u, 1000u, 1025u}) {
    const auto s = one_peer_exponential(n);
    const std::size_t levels = ilog2(n - 1) + 1;
    REQUIRE(s.period() == levels);
    std::vector<out_edge> col;
    for (std::size_t t = 0; t < 3 * levels; ++t)
      for (std::uint32_t r = 0; r < n; r += (n > 40 ? 37 : 1)) {
        s.out_edges(t, r, col);
        const std::size_t to = (r + (std::size_t{1} << (t % levels))) % n;
        REQUIRE(col.size() == 2);
        std::set<std::uint32_t> got{col[0].to, col[1].to};
        REQUIRE(got == std::set<std::uint32_t>{r, static_cast<std::uint32_t>(to)});
        REQUIRE(col[0].share == 0.5);
        REQUIRE(col[1].share == 0.5);
      }
  }
  // n = 8 cycles through offsets 1, 2, 4
  REQUIRE(exponential_offsets(8) == std::vector<std::size_t>{1, 2, 4});
}

TEST_CASE("integer floor_log is exact where floating-point log is not", "[topology]") {
  for (std::size_t x = 1; x < 5000; ++x) {
    REQUIRE(floor_log(x, 2) == ilog2(x));
    std::size_t e = 0, p = 3;
    while (p <= x) ++e, p *= 3;
    REQUIRE(floor_log(x, 3) == e);
  }
  REQUIRE(floor_log(243, 3) == 5);  // std::log(243) / std::log(3) = 4.999999999999999
  REQUIRE(floor_log(std::size_t{1} << 40, 2) == 40);
  REQUIRE(floor_log(~std::size_t{0}, 2) == 63);
}

namespace {
/// SGP's offset lists the simplest way: loops over integer powers below n, no logarithms.
std::vector<std::size_t> ref_k_peer_offsets(std::size_t n, std::size_t k) {
  std::vector<std::size_t> out;
  for (std::size_t pw = 1; pw <= n - 1; pw *= k + 1)
    for (std::size_t j = 1; j <= k; ++j) out.push_back(j * pw % n);
  return out;
}
std::vector<std::size_t> ref_bidirectional_offsets(std::size_t n) {
  std::vector<std::size_t> out;
  for (std::size_t pw = 1; pw <= n - 1; pw *= 2) {
    out.push_back(pw % n);
    out.push_back((n - pw) % n);
  }
  return out;
}

/// Round t's column of node r under the offset list: keep w, send w per chunk entry, merged.
std::map<std::uint32_t, double> ref_column(std::size_t n, const std::vector<std::size_t>& list,
                                           std::size_t k, std::size_t t, std::size_t r) {
  const double w = 1.0 / static_cast<double>(k + 1);
  std::map<std::uint32_t, double> col{{static_cast<std::uint32_t>(r), w}};
  for (std::size_t p = 0; p < k; ++p)
    col[static_cast<std::uint32_t>((r + list[(t * k + p) % list.size()]) % n)] += w;
  return col;
}

void check_offset_schedule(const periodic_schedule& s, std::size_t n,
                           const std::vector<std::size_t>& list, std::size_t k) {
  const std::size_t period = std::lcm(list.size(), k) / k;
  REQUIRE(s.num_nodes() == n);
  REQUIRE(s.period() == period);
  std::vector<out_edge> col;
  // every node for small n, a few for large n (the rule is the same for every node)
  std::vector<std::size_t> nodes;
  if (n <= 40)
    for (std::size_t r = 0; r < n; ++r) nodes.push_back(r);
  else
    nodes = {0, 1, n / 2, n - 1};
  for (std::size_t t = 0; t < period + 2; ++t)
    for (std::size_t r : nodes) {
      s.out_edges(t, static_cast<std::uint32_t>(r), col);
      std::map<std::uint32_t, double> got;
      double sum = 0;
      for (const auto& e : col) {
        REQUIRE(got.count(e.to) == 0);  // distinct receivers
        got[e.to] = e.share;
        sum += e.share;
      }
      REQUIRE(col[0].to == r);
      REQUIRE(std::abs(sum - 1.0) < 1e-12);
      const auto want = ref_column(n, list, k, t, r);
      REQUIRE(got.size() == want.size());
      for (const auto& [to, share] : want) {
        REQUIRE(got.count(to) == 1);
        REQUIRE(got[to] == Approx(share).margin(1e-15));
      }
    }
}
}  // namespace

TEST_CASE("exponential offsets as SGP's graph manager lists them, duplicates kept", "[topology]") {
  // the examples of docs/design/algorithms.md, literally
  REQUIRE(exponential_offsets(8) == std::vector<std::size_t>{1, 2, 4});
  REQUIRE(k_peer_exponential_offsets(16, 2) == std::vector<std::size_t>{1, 2, 3, 6, 9, 2});
  REQUIRE(bidirectional_exponential_offsets(8) == std::vector<std::size_t>{1, 7, 2, 6, 4, 4});
  REQUIRE(k_peer_exponential_offsets(6, 2) == std::vector<std::size_t>{1, 2, 3, 0});  // 6 = 0 mod 6
  REQUIRE(bidirectional_exponential(8).period() == 6);
  REQUIRE(k_peer_exponential(16, 2).period() == 3);
  REQUIRE(k_peer_exponential_offsets(1, 1).empty());
  REQUIRE(bidirectional_exponential_offsets(1).empty());

  // n = 16, k = 2: rounds use [1, 2], [3, 6], [9, 2], then again; keep and send 1/3
  const auto k2 = k_peer_exponential(16, 2);
  const std::vector<std::vector<std::uint32_t>> chunks = {{1, 2}, {3, 6}, {9, 2}};
  std::vector<out_edge> col;
  for (std::size_t t = 0; t < 9; ++t) {
    k2.out_edges(t, 5, col);
    const std::uint32_t lo = 5 + std::min(chunks[t % 3][0], chunks[t % 3][1]);
    const std::uint32_t hi = 5 + std::max(chunks[t % 3][0], chunks[t % 3][1]);
    REQUIRE(col == std::vector<out_edge>{{5, 1.0 / 3}, {lo, 1.0 / 3}, {hi, 1.0 / 3}});
  }
  // n = 8 bidirectional: node 3 pushes to 4, 2, 5, 1, 7, 7 in rounds 0..5, keeping 1/2
  const std::uint32_t to8[] = {4, 2, 5, 1, 7, 7};
  const auto b8 = bidirectional_exponential(8);
  for (std::size_t t = 0; t < 12; ++t) {
    b8.out_edges(t, 3, col);
    REQUIRE(col == std::vector<out_edge>{{3, 0.5}, {to8[t % 6], 0.5}});
  }
  // n = 6, k = 2: round 1 uses offsets [3, 0]: the 0 adds to the self share
  const auto k6 = k_peer_exponential(6, 2);
  REQUIRE(k6.period() == 2);
  k6.out_edges(1, 4, col);
  REQUIRE(col.size() == 2);
  REQUIRE(col[0].to == 4);
  REQUIRE(col[0].share == Approx(2.0 / 3));
  REQUIRE(col[1] == out_edge{1, 1.0 / 3});
  // n = 8, k = 3: 1, 2, 3, 4, 8 = 0, 12 = 4: round 1 is [4, 0, 4], a repeat and the node itself
  REQUIRE(k_peer_exponential_offsets(8, 3) == std::vector<std::size_t>{1, 2, 3, 4, 0, 4});
  const auto k8 = k_peer_exponential(8, 3);
  REQUIRE(k8.period() == 2);
  k8.out_edges(1, 6, col);
  REQUIRE(col == std::vector<out_edge>{{6, 0.5}, {2, 0.5}});
  k8.out_edges(0, 6, col);
  REQUIRE(col == std::vector<out_edge>{{6, 0.25}, {0, 0.25}, {1, 0.25}, {7, 0.25}});
  // n = 32, k = 3: 16 appears twice, in different rounds ([1, 2, 3], [4, 8, 12], [16, 0, 16])
  REQUIRE(k_peer_exponential_offsets(32, 3) ==
          std::vector<std::size_t>{1, 2, 3, 4, 8, 12, 16, 0, 16});
  REQUIRE(k_peer_exponential_offsets(5, 3) == std::vector<std::size_t>{1, 2, 3, 4, 3, 2});
  REQUIRE(k_peer_exponential_offsets(4, 3) == std::vector<std::size_t>{1, 2, 3});
  // n = 2: bidirectional is 1, 1 (the same peer in both rounds, period 2)
  REQUIRE(bidirectional_exponential_offsets(2) == std::vector<std::size_t>{1, 1});
  REQUIRE(bidirectional_exponential(2).period() == 2);
}

TEST_CASE("exponential graphs for every n from 2 to 1025 match an independent reference", "[topology]") {
  for (std::size_t n = 2; n <= 1025; ++n) {
    INFO("n = " << n);
    std::vector<std::size_t> one;
    for (std::size_t pw = 1; pw <= n - 1; pw *= 2) one.push_back(pw);
    REQUIRE(exponential_offsets(n) == one);
    const auto bi = ref_bidirectional_offsets(n);
    REQUIRE(bidirectional_exponential_offsets(n) == bi);
    for (std::size_t k = 1; k <= 3 && k < n; ++k) {
      INFO("k = " << k);
      REQUIRE(k_peer_exponential_offsets(n, k) == ref_k_peer_offsets(n, k));
    }
    // schedules: offsets, periods, merged shares, validation (a stride of n for the slow check)
    const bool full = n <= 70 || n % 97 == 0 || n == 1024 || n == 1025;
    {
      INFO("one-peer");
      const auto s = one_peer_exponential(n);
      check_offset_schedule(s, n, one, 1);
      if (full) REQUIRE_NOTHROW(validate_schedule(s));
    }
    {
      INFO("bidirectional");
      const auto s = bidirectional_exponential(n);
      check_offset_schedule(s, n, bi, 1);
      if (full) REQUIRE_NOTHROW(validate_schedule(s));
    }
    for (std::size_t k = 1; k <= 3 && k < n; ++k) {
      INFO("k-peer, k = " << k);
      const auto s = k_peer_exponential(n, k);
      check_offset_schedule(s, n, ref_k_peer_offsets(n, k), k);
      if (full) REQUIRE_NOTHROW(validate_schedule(s));
    }
  }
}

TEST_CASE("random out-peers: k distinct others, reproducible, validated", "[topology]") {
  const random_out_peers s(10, 3, 99), same(10, 3, 99), other(10, 3, 100);
  std::vector<out_edge> a, b, c;
  int differ = 0;
  for (std::uint64_t t = 0; t < 50; ++t)
    for (std::uint32_t i = 0; i < 10; ++i) {
      s.out_edges(t, i, a);
      same.out_edges(t, i, b);
      other.out_edges(t, i, c);
      REQUIRE(a == b);
      differ += a != c;
      std::set<std::uint32_t> peers;
      for (const auto& e : a) peers.insert(e.to);
      REQUIRE(peers.size() == 4);
      REQUIRE(peers.count(i) == 1);
      REQUIRE(a[0].to == i);
    }
  REQUIRE(differ > 0);
  REQUIRE_NOTHROW(validate_schedule(s));
  REQUIRE_THROWS_AS(random_out_peers(10, 10, 1), schedule_error);
}

TEST_CASE("strong connectivity check", "[topology]") {
  digraph g(4);
  g.add_edge(0, 1);
  g.add_edge(1, 2);
  g.add_edge(2, 3);
  REQUIRE_FALSE(strongly_connected(g));
  g.add_edge(3, 0);
  REQUIRE(strongly_connected(g));
  REQUIRE_THROWS_WITH(g.add_edge(0, 4), Catch::Contains("outside [0, 4)"));
  // Erdos-Renyi graphs are retried until strongly connected, deterministically per seed
  for (std::uint64_t seed = 0; seed < 5; ++seed) {
    const auto er = erdos_renyi_directed(12, 0.2, seed);
    REQUIRE_NOTHROW(validate_schedule(er));
    REQUIRE(dense_w(er, 0) == dense_w(erdos_renyi_directed(12, 0.2, seed), 0));
  }
}

TEST_CASE("check_column accepts exactly the columns a naive reference accepts", "[topology]") {
  // the naive reference: a set for duplicates, a plain loop for the rest
  auto valid = [](std::uint32_t self, const std::vector<out_edge>& col, std::size_t nodes) {
    std::set<std::uint32_t> seen;
    double sum = 0.0, own = 0.0;
    for (const auto& e : col) {
      if (nodes && e.to >= nodes) return false;
      if (!seen.insert(e.to).second) return false;
      if (!(e.share >= 0.0 && e.share <= 1.0 + column_sum_tolerance)) return false;
      if (e.to == self) own = e.share;
      sum += e.share;
    }
    return own > 0.0 && std::abs(sum - 1.0) <= column_sum_tolerance;
  };
  std::mt19937 gen(77);
  std::size_t accepted = 0, rejected = 0;
  for (int c = 0; c < 20000; ++c) {
    const std::size_t nodes = 2 + gen() % 9;
    const auto self = static_cast<std::uint32_t>(gen() % nodes);
    const std::size_t deg = gen() % 6;
    std::vector<out_edge> col;
    // receivers: mostly distinct (a random subset in random order), sometimes a repeat or one out of range
    std::vector<std::uint32_t> all(nodes);
    std::iota(all.begin(), all.end(), 0u);
    std::shuffle(all.begin(), all.end(), gen);
    if (gen() % 4) std::stable_partition(all.begin(), all.end(), [&](std::uint32_t v) { return v == self; });
    for (std::size_t k = 0; k <= std::min(deg, nodes - 1); ++k) col.push_back({all[k], 1.0});
    if (gen() % 8 == 0) col.push_back({col[gen() % col.size()].to, 0.0});
    if (gen() % 16 == 0) col.push_back({static_cast<std::uint32_t>(nodes + gen() % 3), 0.0});
    // shares: uniform (column stochastic), then perhaps one perturbed by a little or a lot
    for (auto& e : col) e.share = 1.0 / static_cast<double>(col.size());
    switch (gen() % 6) {
      case 0: col[gen() % col.size()].share += 4e-7; break;   // within the tolerance
      case 1: col[gen() % col.size()].share += 3e-6; break;   // beyond it
      case 2: col[gen() % col.size()].share = -col.back().share; break;
      case 3: col[gen() % col.size()].share = std::nan(""); break;
      default: break;
    }
    const std::size_t checked = gen() % 5 == 0 ? 0 : nodes;  // 0: receivers' range not checked
    bool threw = false;
    try {
      check_column(3, self, col, checked);
    } catch (const schedule_error& e) {
      threw = true;
      REQUIRE_THAT(e.what(), Catch::Contains("round 3, node " + std::to_string(self) + ": "));
    }
    INFO("case " << c);
    REQUIRE(threw == !valid(self, col, checked));
    (threw ? rejected : accepted) += 1;
  }
  REQUIRE(accepted > 5000);  // both sides are exercised
  REQUIRE(rejected > 5000);
  // every built-in schedule's columns pass, at every round of a period
  for (const char* spec : {"directed-ring", "undirected-ring", "torus:4x4", "complete", "time-varying-ring",
                           "alternating-ring", "exponential", "exponential:1", "bidirectional-exponential",
                           "erdos-renyi:0.3", "random:3"}) {
    const auto s = parse_schedule(spec, 16, 5);
    std::vector<out_edge> col;
    for (std::uint64_t t = 0; t < (s.period() ? s.period() : 8); ++t)
      for (std::uint32_t j = 0; j < 16; ++j) {
        s.out_edges(t, j, col);
        REQUIRE_NOTHROW(check_column(t, j, col, 16));
      }
  }
  // the messages: the sum with the digits that show it is not 1, a duplicate out of order
  REQUIRE_THROWS_WITH(check_column(2, 0, std::vector<out_edge>{{0, 0.5}, {1, 0.500002}}, 2),
                      "sparsepush: round 2, node 0: shares sum to 1.000002, not 1 (W must be column stochastic)");
  REQUIRE_THROWS_WITH(check_column(2, 0, std::vector<out_edge>{{0, 0.4}, {2, 0.2}, {1, 0.2}, {2, 0.2}}, 3),
                      "sparsepush: round 2, node 0: node 2 appears twice");
  REQUIRE_THROWS_WITH(check_column(2, 0, std::vector<out_edge>{{0, 0.5}, {0, 0.5}}, 3),
                      "sparsepush: round 2, node 0: node 0 appears twice");
}

TEST_CASE("bad schedules are clear errors naming round and node", "[topology]") {
  auto col = [](std::uint32_t self, double ws, std::vector<out_edge> rest) {
    rest.insert(rest.begin(), out_edge{self, ws});
    return rest;
  };
  // not column stochastic: node 1 of round 1 sends 0.5 + 0.6
  std::vector<std::vector<out_edge>> good = {col(0, 0.5, {{1, 0.5}}), col(1, 0.5, {{2, 0.5}}), col(2, 0.5, {{0, 0.5}})};
  auto bad = good;
  bad[1] = col(1, 0.5, {{2, 0.6}});
  periodic_schedule s1({mixing_round::from_columns(good), mixing_round::from_columns(bad)});
  REQUIRE_THROWS_WITH(validate_schedule(s1), Catch::Contains("round 1, node 1") && Catch::Contains("sum to 1.1"));
  // negative weight
  bad = good;
  bad[2] = col(2, 1.5, {{0, -0.5}});
  REQUIRE_THROWS_WITH(validate_schedule(periodic_schedule({mixing_round::from_columns(bad)})),
                      Catch::Contains("round 0, node 2") && Catch::Contains("not in [0, 1]"));
  // missing self-loop
  bad = good;
  bad[0] = {{1, 1.0}};
  REQUIRE_THROWS_WITH(validate_schedule(periodic_schedule({mixing_round::from_columns(bad)})),
                      Catch::Contains("round 0, node 0") && Catch::Contains("missing self-loop"));
  // receiver out of range, duplicate receiver
  bad = good;
  bad[0] = col(0, 0.5, {{3, 0.5}});
  REQUIRE_THROWS_WITH(validate_schedule(periodic_schedule({mixing_round::from_columns(bad)})),
                      Catch::Contains("outside [0, 3)"));
  bad = good;
  bad[0] = col(0, 0.4, {{1, 0.3}, {1, 0.3}});
  REQUIRE_THROWS_WITH(validate_schedule(periodic_schedule({mixing_round::from_columns(bad)})),
                      Catch::Contains("appears twice"));
  // disconnected: two directed rings
  digraph g(6);
  for (std::size_t i = 0; i < 3; ++i) {
    g.add_edge(i, (i + 1) % 3);
    g.add_edge(3 + i, 3 + (i + 1) % 3);
  }
  REQUIRE_THROWS_WITH(validate_schedule(static_schedule(g)), Catch::Contains("not strongly connected"));
  // connected only over the period: each round alone is disconnected, the union is a ring
  digraph a(4), b(4);
  a.add_edge(0, 1);
  a.add_edge(2, 3);
  b.add_edge(1, 2);
  b.add_edge(3, 0);
  REQUIRE_NOTHROW(validate_schedule(time_varying_schedule({a, b})));
  REQUIRE_THROWS_AS(validate_schedule(time_varying_schedule({a})), schedule_error);
  REQUIRE_THROWS_WITH(metropolis_hastings(a), Catch::Contains("undirected"));
}

TEST_CASE("schedule spec strings", "[topology]") {
  REQUIRE(parse_schedule("exponential", 8).period() == 3);
  REQUIRE(parse_schedule("time-varying-ring:1,3", 8).period() == 2);
  REQUIRE(parse_schedule("random:2", 8, 1).period() == 0);
  REQUIRE_THROWS_WITH(parse_schedule("ring", 8), Catch::Contains("unknown schedule 'ring'"));
  REQUIRE_THROWS_WITH(parse_schedule("torus:3x3", 8), Catch::Contains("9 nodes, not 8"));
  REQUIRE_THROWS_WITH(parse_schedule("torus", 8), Catch::Contains("RxC"));
  REQUIRE_THROWS_WITH(parse_schedule("random", 8), Catch::Contains("needs K"));
  REQUIRE_THROWS_WITH(parse_schedule("exponential:x", 8), Catch::Contains("not a whole number"));
  REQUIRE_THROWS_WITH(parse_schedule("exponential:8", 8), Catch::Contains("1 <= k < n"));
  REQUIRE_THROWS_WITH(parse_schedule("time-varying-ring:8", 8), Catch::Contains("multiple of n"));
  REQUIRE_THROWS_WITH(parse_schedule("directed-ring:2", 8), Catch::Contains("takes no argument"));
  REQUIRE_THROWS_WITH(parse_schedule("directed-ring", 1), Catch::Contains("at least 2 nodes"));
  REQUIRE_THROWS_WITH(parse_schedule("erdos-renyi:2", 8), Catch::Contains("(0, 1]"));
}
