// sparsepush/topology/graph.hpp: directed graphs and per-round mixing weights.
// W(t)[i][j] is the share of node j's mass that lands at node i in round t. A schedule hands
// each sender j its column: out-edges (j -> i, W[i][j]) including the self-edge (j -> j, W[j][j]),
// and each receiver i its row: in-edges (j -> i, W[i][j]) including (i -> i, W[i][i]).
// Column stochastic: sum_i W[i][j] = 1, entries >= 0, W[j][j] > 0 (docs/design/algorithms.md, Notation).
// Weight rules: uniform push (keep 1/(m+1), send 1/(m+1) to each of m out-neighbours, as SGP)
// and Metropolis-Hastings for undirected graphs (W_ij = 1/(1 + max(deg_i, deg_j)), symmetric and
// doubly stochastic, for D-PSGD / DeepSqueeze / CHOCO).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "../config.hpp"

namespace sparsepush {
inline namespace v0 {

/// A schedule or topology is malformed (not column stochastic, disconnected, bad node...).
class schedule_error : public error {
 public:
  using error::error;
};

/// One push: the receiver and the share of the sender's mass it gets (W[to][from]).
struct out_edge {
  std::uint32_t to = 0;  ///< the receiving node (the sender itself for the self-edge)
  double share = 0.0;  ///< the fraction of the sender's mass it sends there; a column's shares sum to 1
  /// Equal when receiver and share are (the share compared exactly).
  friend bool operator==(const out_edge&, const out_edge&) = default;
};

/// One incoming push: the sender and the share of its mass this node gets (W[node][from]).
struct in_edge {
  std::uint32_t from = 0;  ///< the sending node (this node itself for the self-edge)
  double share = 0.0;  ///< the fraction of the sender's mass this node receives
  /// Equal when sender and share are (the share compared exactly).
  friend bool operator==(const in_edge&, const in_edge&) = default;
};

/// A directed graph on n nodes without self-loops (they are implicit), edges kept sorted.
class digraph {
 public:
  digraph() = default;
  /// n nodes and no edges.
  explicit digraph(std::size_t n) : out_(n) {}

  /// The number of nodes n.
  std::size_t num_nodes() const noexcept { return out_.size(); }

  /// Add from -> to; a self-loop or a repeated edge is ignored (self-loops are implicit).
  void add_edge(std::size_t from, std::size_t to) {
    if (from >= out_.size() || to >= out_.size())
      throw schedule_error("edge " + std::to_string(from) + " -> " + std::to_string(to) +
                           " names a node outside [0, " + std::to_string(out_.size()) + ")");
    if (from == to) return;
    auto& o = out_[from];
    const auto t = static_cast<std::uint32_t>(to);
    const auto it = std::lower_bound(o.begin(), o.end(), t);
    if (it == o.end() || *it != t) o.insert(it, t);
  }
  /// Add both from -> to and to -> from.
  void add_undirected_edge(std::size_t a, std::size_t b) {
    add_edge(a, b);
    add_edge(b, a);
  }

  /// The out-neighbours of node i in ascending order, without i itself; i must be < num_nodes().
  std::span<const std::uint32_t> out_neighbours(std::size_t i) const { return out_[i]; }
  /// True when the edge from -> to was added; `from` must be < num_nodes().
  bool has_edge(std::size_t from, std::size_t to) const {
    return std::binary_search(out_[from].begin(), out_[from].end(), static_cast<std::uint32_t>(to));
  }
  /// True when every edge has its reverse.
  bool symmetric() const {
    for (std::size_t i = 0; i < out_.size(); ++i)
      for (auto j : out_[i])
        if (!has_edge(j, i)) return false;
    return true;
  }

 private:
  std::vector<std::vector<std::uint32_t>> out_;
};

/// Mixing weights of one round, stored both by sender (columns of W) and by receiver (rows of
/// W, built once from the columns), each as CSR.
class mixing_round {
 public:
  mixing_round() = default;
  /// An empty round for n nodes (no edges); from_columns() builds a real one.
  explicit mixing_round(std::size_t n) : start_(n + 1, 0), row_start_(n + 1, 0) {}

  /// Build from per-sender edge lists (each must include the sender's self-edge). Rows list the
  /// senders in ascending order; a receiver a column names twice gets one in-edge, the summed share.
  static mixing_round from_columns(const std::vector<std::vector<out_edge>>& cols) {
    const std::size_t n = cols.size();
    mixing_round r(n);
    for (std::size_t j = 0; j < n; ++j) {
      r.edges_.insert(r.edges_.end(), cols[j].begin(), cols[j].end());
      r.start_[j + 1] = r.edges_.size();
    }
    // transpose by counting sort on the receiver; scanning senders in order keeps rows sorted
    std::vector<std::size_t> fill(n + 1, 0);
    for (const auto& e : r.edges_)
      if (e.to < n) ++fill[e.to + 1];
    for (std::size_t i = 0; i < n; ++i) fill[i + 1] += fill[i];
    std::vector<in_edge> rows(fill[n]);
    std::vector<std::size_t> next(fill.begin(), fill.end() - 1);
    for (std::size_t j = 0; j < n; ++j)
      for (const auto& e : cols[j])
        if (e.to < n) rows[next[e.to]++] = in_edge{static_cast<std::uint32_t>(j), e.share};
    // merge a sender repeated within one row (only a malformed column repeats a receiver)
    for (std::size_t i = 0; i < n; ++i) {
      const std::size_t begin = r.row_edges_.size();
      for (std::size_t p = fill[i]; p < fill[i + 1]; ++p) {
        if (r.row_edges_.size() > begin && r.row_edges_.back().from == rows[p].from)
          r.row_edges_.back().share += rows[p].share;
        else
          r.row_edges_.push_back(rows[p]);
      }
      r.row_start_[i + 1] = r.row_edges_.size();
    }
    return r;
  }

  /// The number of nodes n (0 for a default-constructed round).
  std::size_t num_nodes() const noexcept { return start_.empty() ? 0 : start_.size() - 1; }
  /// Column `sender` of W: its out-edges, self-edge included, in the order they were given.
  std::span<const out_edge> column(std::size_t sender) const {
    return std::span<const out_edge>(edges_).subspan(start_[sender], start_[sender + 1] - start_[sender]);
  }
  /// Row `receiver` of W: its in-edges, self-edge included, by ascending sender.
  std::span<const in_edge> row(std::size_t receiver) const {
    return std::span<const in_edge>(row_edges_).subspan(row_start_[receiver],
                                                        row_start_[receiver + 1] - row_start_[receiver]);
  }

 private:
  std::vector<std::size_t> start_;
  std::vector<out_edge> edges_;
  std::vector<std::size_t> row_start_;
  std::vector<in_edge> row_edges_;
};

/// Uniform push on g: every node keeps 1/(m+1) and sends 1/(m+1) to each of its m out-neighbours.
inline mixing_round uniform_push(const digraph& g) {
  std::vector<std::vector<out_edge>> cols(g.num_nodes());
  for (std::size_t j = 0; j < g.num_nodes(); ++j) {
    const auto nb = g.out_neighbours(j);
    const double w = 1.0 / static_cast<double>(nb.size() + 1);
    cols[j].push_back({static_cast<std::uint32_t>(j), w});
    for (auto i : nb) cols[j].push_back({i, w});
  }
  return mixing_round::from_columns(cols);
}

/// Metropolis-Hastings weights on an undirected (symmetric) g: symmetric, doubly stochastic.
inline mixing_round metropolis_hastings(const digraph& g) {
  if (!g.symmetric())
    throw schedule_error("Metropolis-Hastings weights need an undirected graph (every edge with its reverse)");
  std::vector<std::vector<out_edge>> cols(g.num_nodes());
  for (std::size_t j = 0; j < g.num_nodes(); ++j) {
    const auto nb = g.out_neighbours(j);
    double sent = 0.0;
    std::vector<out_edge> col;
    for (auto i : nb) {
      const double w = 1.0 / (1.0 + static_cast<double>(std::max(nb.size(), g.out_neighbours(i).size())));
      col.push_back({i, w});
      sent += w;
    }
    cols[j].push_back({static_cast<std::uint32_t>(j), 1.0 - sent});
    cols[j].insert(cols[j].end(), col.begin(), col.end());
  }
  return mixing_round::from_columns(cols);
}

}  // namespace v0
}  // namespace sparsepush
