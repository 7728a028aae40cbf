// Tests of sparsepush/adapters/boost_graph.hpp: digraph <-> Boost.Graph round trips (adjacency_list
// directed / bidirectional / undirected, compressed_sparse_row_graph), schedules from Boost graphs
// (uniform push, Metropolis-Hastings), and connectivity checked by boost::strong_components
// against sparsepush::strongly_connected and validate_schedule.
#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <set>
#include <sparsepush/adapters/boost_graph.hpp>
#include <sparsepush/topology/exponential.hpp>
#include <sparsepush/topology/random.hpp>
#include <sparsepush/topology/rings.hpp>
#include <string>
#include <utility>
#include <vector>

using namespace sparsepush;

namespace {
using directed_list = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;
using bidirectional_list = boost::adjacency_list<boost::vecS, boost::vecS, boost::bidirectionalS>;
using undirected_list = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
using csr_graph = boost::compressed_sparse_row_graph<boost::directedS>;

static_assert(boost_indexed_graph<directed_list> && boost_indexed_graph<bidirectional_list> &&
              boost_indexed_graph<undirected_list> && boost_indexed_graph<csr_graph>);

/// A random digraph on n nodes, each edge i -> j (i != j) present with probability p.
digraph random_digraph(std::size_t n, double p, std::mt19937& gen) {
  std::bernoulli_distribution coin(p);
  digraph g(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (i != j && coin(gen)) g.add_edge(i, j);
  return g;
}

/// A random undirected (symmetric) digraph.
digraph random_symmetric(std::size_t n, double p, std::mt19937& gen) {
  std::bernoulli_distribution coin(p);
  digraph g(n);
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = i + 1; j < n; ++j)
      if (coin(gen)) g.add_undirected_edge(i, j);
  return g;
}

bool same_graph(const digraph& a, const digraph& b) {
  if (a.num_nodes() != b.num_nodes()) return false;
  for (std::size_t i = 0; i < a.num_nodes(); ++i) {
    const auto x = a.out_neighbours(i), y = b.out_neighbours(i);
    if (!std::equal(x.begin(), x.end(), y.begin(), y.end())) return false;
  }
  return true;
}

std::size_t edge_count(const digraph& g) {
  std::size_t m = 0;
  for (std::size_t i = 0; i < g.num_nodes(); ++i) m += g.out_neighbours(i).size();
  return m;
}

std::set<std::pair<std::uint32_t, double>> column_set(const mixing_round& r, std::size_t j) {
  std::set<std::pair<std::uint32_t, double>> out;
  for (const auto& e : r.column(j)) out.emplace(e.to, e.share);
  return out;
}

/// The message of the schedule_error f throws ("" if it throws nothing).
template <class F>
std::string schedule_error_message(F&& f) {
  try {
    f();
  } catch (const schedule_error& e) {
    return e.what();
  }
  return "";
}

/// n nodes in two disjoint directed rings: 0 .. n/2-1 and n/2 .. n-1.
digraph two_rings(std::size_t n) {
  digraph g(n);
  const std::size_t h = n / 2;
  for (std::size_t i = 0; i < h; ++i) g.add_edge(i, (i + 1) % h);
  for (std::size_t i = 0; i < n - h; ++i) g.add_edge(h + i, h + (i + 1) % (n - h));
  return g;
}
}  // namespace

TEST_CASE("digraph -> Boost -> digraph round trip on random digraphs", "[topology]") {
  std::mt19937 gen(20240611u);
  for (std::size_t n : {0u, 1u, 2u, 3u, 7u, 16u, 41u}) {
    for (double p : {0.0, 0.1, 0.35, 1.0}) {
      CAPTURE(n, p);
      const digraph d = random_digraph(n, p, gen);

      const auto a = to_boost_graph(d);  // default: adjacency_list<vecS, vecS, directedS>
      static_assert(std::is_same_v<std::remove_const_t<decltype(a)>, directed_list>);
      REQUIRE(num_vertices(a) == n);
      REQUIRE(num_edges(a) == edge_count(d));
      REQUIRE(same_graph(from_boost_graph(a), d));

      const auto b = to_boost_graph<bidirectional_list>(d);
      REQUIRE(num_edges(b) == edge_count(d));
      REQUIRE(same_graph(from_boost_graph(b), d));

      const auto c = to_boost_graph<csr_graph>(d);
      REQUIRE(num_vertices(c) == n);
      REQUIRE(num_edges(c) == edge_count(d));
      REQUIRE(same_graph(from_boost_graph(c), d));

      // undirected: each pair once, and back to the same symmetric digraph
      const digraph s = random_symmetric(n, p, gen);
      const auto u = to_boost_graph<undirected_list>(s);
      REQUIRE(2 * num_edges(u) == edge_count(s));
      REQUIRE(same_graph(from_boost_graph(u), s));
    }
  }
}

TEST_CASE("from_boost_graph drops self-loops and parallel edges, undirected gives both ways",
          "[topology]") {
  directed_list g(4);
  add_edge(0, 0, g);
  add_edge(0, 1, g);
  add_edge(0, 1, g);
  add_edge(3, 2, g);
  REQUIRE(num_edges(g) == 4);
  const digraph d = from_boost_graph(g);
  REQUIRE(d.num_nodes() == 4);
  REQUIRE(edge_count(d) == 2);
  REQUIRE(d.has_edge(0, 1));
  REQUIRE(d.has_edge(3, 2));
  REQUIRE_FALSE(d.has_edge(1, 0));

  undirected_list u(3);
  add_edge(0, 1, u);
  add_edge(1, 0, u);  // parallel in the undirected sense
  add_edge(2, 2, u);
  const digraph du = from_boost_graph(u);
  REQUIRE(edge_count(du) == 2);
  REQUIRE(du.has_edge(0, 1));
  REQUIRE(du.has_edge(1, 0));
  REQUIRE(du.symmetric());
}

TEST_CASE("undirected Boost ring with Metropolis-Hastings equals undirected_ring", "[topology]") {
  for (std::size_t n : {2u, 3u, 4u, 7u, 16u}) {
    CAPTURE(n);
    undirected_list g(n);
    for (std::size_t i = 0; i < n; ++i) add_edge(i, (i + 1) % n, g);
    const auto s = schedule_from_boost_graph(g, true);
    const auto ref = undirected_ring(n);
    REQUIRE(s.num_nodes() == n);
    REQUIRE(s.period() == 1);
    for (std::size_t j = 0; j < n; ++j) {
      CAPTURE(j);
      REQUIRE(column_set(s.at(0), j) == column_set(ref.at(0), j));
    }
    REQUIRE_NOTHROW(validate_schedule_boost(s));

    // default: uniform push on the same graph (both directions), keep and send 1/(deg+1)
    const auto up = schedule_from_boost_graph(g);
    const digraph d = from_boost_graph(g);
    const auto ref_up = static_schedule(d);
    for (std::size_t j = 0; j < n; ++j)
      REQUIRE(column_set(up.at(0), j) == column_set(ref_up.at(0), j));
  }
}

TEST_CASE("compressed_sparse_row_graph works as input and output", "[topology]") {
  const std::size_t n = 6;
  // a directed ring 0 -> 1 -> ... -> 5 -> 0 plus a chord and a duplicate, unsorted
  std::vector<std::pair<std::size_t, std::size_t>> list{{5, 0}, {2, 3}, {0, 1}, {1, 2}, {3, 4},
                                                        {4, 5}, {0, 3}, {0, 3}, {2, 2}};
  const csr_graph g(boost::edges_are_unsorted_multi_pass, list.begin(), list.end(), n);
  REQUIRE(num_vertices(g) == n);
  REQUIRE(num_edges(g) == list.size());

  digraph ref(n);
  for (const auto& [a, b] : list) ref.add_edge(a, b);
  const digraph d = from_boost_graph(g);
  REQUIRE(same_graph(d, ref));
  REQUIRE(edge_count(d) == 7);

  REQUIRE(strongly_connected_boost(g));
  REQUIRE(strong_component_count_boost(g) == 1);
  const auto s = schedule_from_boost_graph(g);
  const auto s_ref = static_schedule(ref);
  for (std::size_t j = 0; j < n; ++j) REQUIRE(column_set(s.at(0), j) == column_set(s_ref.at(0), j));
  REQUIRE_NOTHROW(validate_schedule_boost(s));
  REQUIRE(same_graph(from_boost_graph(to_boost_graph<csr_graph>(d)), d));

  // a CSR graph that is not symmetric cannot take Metropolis-Hastings weights
  REQUIRE_THROWS_AS(schedule_from_boost_graph(g, true), schedule_error);

  const csr_graph broken(boost::edges_are_unsorted_multi_pass, list.begin(), list.begin() + 2, n);
  REQUIRE_FALSE(strongly_connected_boost(broken));
}

TEST_CASE("strongly_connected_boost agrees with strongly_connected", "[topology]") {
  std::mt19937 gen(7u);
  std::uniform_int_distribution<std::size_t> size(1, 14);
  std::uniform_real_distribution<double> prob(0.02, 0.5);
  std::size_t connected = 0, disconnected = 0;
  for (int trial = 0; trial < 600; ++trial) {
    const std::size_t n = size(gen);
    const double p = prob(gen);
    CAPTURE(trial, n, p);
    const digraph d = random_digraph(n, p, gen);
    const bool expect = strongly_connected(d);
    (expect ? connected : disconnected) += 1;
    REQUIRE(strongly_connected_boost(to_boost_graph(d)) == expect);
    REQUIRE(strongly_connected_boost(to_boost_graph<bidirectional_list>(d)) == expect);
    REQUIRE(strongly_connected_boost(to_boost_graph<csr_graph>(d)) == expect);

    const digraph s = random_symmetric(n, p, gen);  // undirected: connected components
    REQUIRE(strongly_connected_boost(to_boost_graph<undirected_list>(s)) == strongly_connected(s));
  }
  CAPTURE(connected, disconnected);
  REQUIRE(connected >= 50);
  REQUIRE(disconnected >= 50);

  REQUIRE(strongly_connected_boost(directed_list(0)));
  REQUIRE(strongly_connected_boost(directed_list(1)));
  REQUIRE_FALSE(strongly_connected_boost(directed_list(2)));
  REQUIRE(strong_component_count_boost(to_boost_graph(two_rings(8))) == 2);
  REQUIRE(strong_component_count_boost(directed_list(5)) == 5);
}

TEST_CASE("validate_schedule_boost rejects a disconnected union graph", "[topology]") {
  const auto s = static_schedule(two_rings(8));
  REQUIRE_THROWS_AS(validate_schedule_boost(s), schedule_error);
  const std::string msg = schedule_error_message([&] { validate_schedule_boost(s); });
  CAPTURE(msg);
  REQUIRE(msg.find("not strongly connected") != std::string::npos);

  const auto uni = union_graph_to_boost(s);
  REQUIRE(num_vertices(uni) == 8);
  REQUIRE(num_edges(uni) == 8);
  REQUIRE(strong_component_count_boost(uni) == 2);
}

TEST_CASE("validate_schedule_boost passes for exponential and random out-peers", "[topology]") {
  const auto e = one_peer_exponential(16);
  REQUIRE_NOTHROW(validate_schedule_boost(e));
  const auto uni = union_graph_to_boost(e);
  REQUIRE(num_vertices(uni) == 16);
  REQUIRE(num_edges(uni) == 16 * 4);  // offsets 1, 2, 4, 8 over one period
  for (auto [it, end] = edges(uni); it != end; ++it) REQUIRE(source(*it, uni) != target(*it, uni));

  for (std::uint64_t seed : {1u, 2u, 99u}) {
    CAPTURE(seed);
    const random_out_peers r(10, 2, seed);
    REQUIRE_NOTHROW(validate_schedule_boost(r));
    REQUIRE_NOTHROW(validate_schedule_boost(r, 8));
    REQUIRE(strongly_connected_boost(union_graph_to_boost(r)));
    // window 1: each node has exactly its 2 peers
    REQUIRE(num_edges(union_graph_to_boost(r, 1)) == 20);
  }
  REQUIRE_THROWS_AS(union_graph_to_boost(random_out_peers(10, 2, 1), 0), schedule_error);
}

TEST_CASE("Metropolis-Hastings on a directed Boost graph throws schedule_error", "[topology]") {
  directed_list g(3);
  add_edge(0, 1, g);
  add_edge(1, 2, g);
  add_edge(2, 0, g);
  REQUIRE_THROWS_AS(schedule_from_boost_graph(g, true), schedule_error);
  const std::string msg = schedule_error_message([&] { schedule_from_boost_graph(g, true); });
  CAPTURE(msg);
  REQUIRE(msg.find("Metropolis-Hastings") != std::string::npos);
  REQUIRE(msg.find("0 -> 1") != std::string::npos);
  REQUIRE_NOTHROW(schedule_from_boost_graph(g));  // uniform push is fine on a directed graph

  // a directed graph with every edge reversed is symmetric: allowed, same weights as undirected
  directed_list sym(3);
  for (std::size_t i = 0; i < 3; ++i) {
    add_edge(i, (i + 1) % 3, sym);
    add_edge((i + 1) % 3, i, sym);
  }
  const auto s = schedule_from_boost_graph(sym, true);
  const auto ref = undirected_ring(3);
  for (std::size_t j = 0; j < 3; ++j) REQUIRE(column_set(s.at(0), j) == column_set(ref.at(0), j));
}
