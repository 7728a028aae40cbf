// sparsepush/adapters/boost_graph.hpp: Boost.Graph interop for topologies. Any Boost graph with an
// integer vertex_index map becomes a digraph or a static schedule (uniform push or
// Metropolis-Hastings); digraphs and schedule union graphs export to Boost graphs; and
// connectivity is cross-checked with boost::strong_components. Include it only where Boost is.
#pragma once

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/compressed_sparse_row_graph.hpp>
#include <boost/graph/graph_traits.hpp>
#include <boost/graph/strong_components.hpp>
#include <boost/property_map/property_map.hpp>
#include <concepts>
#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "../topology/graph.hpp"
#include "../topology/schedule.hpp"
#include "../topology/validate.hpp"

namespace sparsepush {
inline namespace v0 {

/// The Boost graph type exports default to: directed, vertices 0..n-1.
using boost_digraph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS>;

/// A Boost.Graph graph that lists its vertices and has an integer vertex_index map (vecS
/// adjacency_list, compressed_sparse_row_graph, ...), plus edges(g) or out_edges(v, g).
template <class G>
concept boost_indexed_graph = boost::is_vertex_list_graph<G>::value &&
                              (boost::is_edge_list_graph<G>::value ||
                               boost::is_incidence_graph<G>::value) &&
                              requires(const G& g) {
  { get(boost::vertex_index, g, *vertices(g).first) } -> std::integral;
};

namespace detail {
template <class G>
std::size_t boost_vertex_number(const G& g, typename boost::graph_traits<G>::vertex_descriptor v,
                                std::size_t n) {
  const auto i = get(boost::vertex_index, g, v);
  if constexpr (std::is_signed_v<decltype(i)>)
    if (i < 0)
      throw schedule_error("Boost graph vertex_index " + std::to_string(i) + " is negative");
  if (static_cast<std::size_t>(i) >= n)
    throw schedule_error("Boost graph vertex_index " + std::to_string(i) + " is outside [0, " +
                         std::to_string(n) + ")");
  return static_cast<std::size_t>(i);
}

/// Union over one period (or `window` rounds) of the edges with positive share, no self-edges.
template <schedule S>
digraph boost_union_digraph(const S& s, std::size_t window) {
  const std::size_t n = s.num_nodes();
  const std::size_t rounds = validation_rounds(s, window);
  if (rounds == 0) throw schedule_error("an aperiodic schedule needs a union window > 0");
  digraph uni(n);
  std::vector<out_edge> col;
  for (std::size_t t = 0; t < rounds; ++t)
    for (std::uint32_t j = 0; j < n; ++j) {
      s.out_edges(t, j, col);
      for (const auto& e : col) {
        if (e.to >= n)
          throw schedule_error("round " + std::to_string(t) + ", node " + std::to_string(j) +
                               ": edge to node " + std::to_string(e.to) + " outside [0, " +
                               std::to_string(n) + ")");
        if (e.to != j && e.share > 0.0) uni.add_edge(j, e.to);
      }
    }
  return uni;
}
}  // namespace detail

/// The digraph of a Boost graph: vertex v is node vertex_index(v); undirected edges give both
/// directions; self-loops and parallel edges are dropped.
template <boost_indexed_graph G>
digraph from_boost_graph(const G& g) {
  const std::size_t n = num_vertices(g);
  digraph d(n);
  constexpr bool undirected = boost::is_undirected_graph<G>::value;
  auto add = [&](const auto& e) {
    const auto a = detail::boost_vertex_number(g, source(e, g), n);
    const auto b = detail::boost_vertex_number(g, target(e, g), n);
    if constexpr (undirected)
      d.add_undirected_edge(a, b);
    else
      d.add_edge(a, b);
  };
  if constexpr (boost::is_edge_list_graph<G>::value) {
    for (auto [it, end] = edges(g); it != end; ++it) add(*it);
  } else {
    for (auto [v, vend] = vertices(g); v != vend; ++v)
      for (auto [it, end] = out_edges(*v, g); it != end; ++it) add(*it);
  }
  return d;
}

/// A static schedule on a Boost graph: uniform push, or Metropolis-Hastings weights (the graph
/// must then be undirected or symmetric; schedule_error names an edge without its reverse).
template <boost_indexed_graph G>
periodic_schedule schedule_from_boost_graph(const G& g, bool metropolis = false) {
  const digraph d = from_boost_graph(g);
  if (!metropolis) return static_schedule(d, "boost-graph");
  for (std::size_t i = 0; i < d.num_nodes(); ++i)
    for (auto j : d.out_neighbours(i))
      if (!d.has_edge(j, i))
        throw schedule_error(
            "Metropolis-Hastings weights on a Boost graph need an undirected "
            "(symmetric) graph, but edge " +
            std::to_string(i) + " -> " + std::to_string(j) + " has no reverse");
  return periodic_schedule({metropolis_hastings(d)}, "boost-graph-metropolis");
}

/// A Boost graph of d, vertex i = node i: an adjacency_list with vecS vertices (default
/// directedS; an undirected G gets each pair once), a compressed_sparse_row_graph, or any graph
/// constructible from (first, last, n) over vertex pairs or from a vertex count plus add_edge.
/// The graph is returned as a prvalue where possible: adjacency_list has no move constructor, and
/// instantiating its copy constructor trips GCC 12's -Wmaybe-uninitialized inside Boost.
template <class G = boost_digraph>
G to_boost_graph(const digraph& d) {
  using vertex_t = typename boost::graph_traits<G>::vertex_descriptor;
  using size_type = typename boost::graph_traits<G>::vertices_size_type;
  using edge_it = typename std::vector<std::pair<vertex_t, vertex_t>>::const_iterator;
  constexpr bool undirected = boost::is_undirected_graph<G>::value;
  // CSR: the multi-pass constructor (the sorted one trips GCC 12's -Warray-bounds at -O3)
  constexpr bool csr = std::is_constructible_v<G, boost::edges_are_unsorted_multi_pass_t, edge_it,
                                               edge_it, size_type>;
  const std::size_t n = d.num_nodes();
  auto keep = [&d](std::size_t i, std::size_t j) {  // an undirected pair only from its first end
    return !undirected || i < j || !d.has_edge(j, i);
  };
  if constexpr (csr || std::is_constructible_v<G, edge_it, edge_it, size_type>) {
    std::vector<std::pair<vertex_t, vertex_t>> list;
    for (std::size_t i = 0; i < n; ++i)
      for (auto j : d.out_neighbours(i))
        if (keep(i, j)) list.emplace_back(static_cast<vertex_t>(i), static_cast<vertex_t>(j));
    if constexpr (csr)
      return G(boost::edges_are_unsorted_multi_pass, list.cbegin(), list.cend(),
               static_cast<size_type>(n));
    else
      return G(list.cbegin(), list.cend(), static_cast<size_type>(n));
  } else {
    G g(static_cast<size_type>(n));
    for (std::size_t i = 0; i < n; ++i)
      for (auto j : d.out_neighbours(i))
        if (keep(i, j)) add_edge(vertex(i, g), vertex(j, g), g);
    return g;
  }
}

/// The union graph of s over one period (or `window` rounds when s.period() == 0): edges with a
/// positive share, self-edges excluded.
template <schedule S>
boost_digraph union_graph_to_boost(const S& s, std::size_t window = 64) {
  return to_boost_graph<boost_digraph>(detail::boost_union_digraph(s, window));
}

/// Number of strongly connected components of g by boost::strong_components (an undirected g is
/// taken with both directions of every edge, so this is its number of connected components).
template <boost_indexed_graph G>
std::size_t strong_component_count_boost(const G& g) {
  if constexpr (boost::is_directed_graph<G>::value && boost::is_incidence_graph<G>::value) {
    std::vector<std::size_t> comp(num_vertices(g));
    return static_cast<std::size_t>(boost::strong_components(
        g, boost::make_iterator_property_map(comp.begin(), get(boost::vertex_index, g))));
  } else {
    return strong_component_count_boost(to_boost_graph<boost_digraph>(from_boost_graph(g)));
  }
}

/// True when every vertex of g reaches every other (always for 0 or 1 vertices).
template <boost_indexed_graph G>
bool strongly_connected_boost(const G& g) {
  return num_vertices(g) <= 1 || strong_component_count_boost(g) == 1;
}

/// validate_schedule(s, window), then cross-check with Boost.Graph: the union graph over one
/// period (or the window) has exactly one strongly connected component.
template <schedule S>
void validate_schedule_boost(const S& s, std::size_t window = 64) {
  validate_schedule(s, window);
  const auto uni = union_graph_to_boost(s, window);
  if (num_vertices(uni) <= 1) return;
  const std::size_t k = strong_component_count_boost(uni);
  if (k != 1)
    throw schedule_error("Boost.Graph strong_components finds " + std::to_string(k) +
                         " strongly connected components in the union graph over rounds 0.." +
                         std::to_string(validation_rounds(s, window) - 1) +
                         " (need 1): push-sum cannot reach the average");
}

}  // namespace v0
}  // namespace sparsepush
