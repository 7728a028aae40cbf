// sparsepush/gossip/lockstep.hpp: the lockstep round every gossip algorithm runs (staleness 0 in
// docs/design/algorithms.md, "Asynchronous and overlapped push-sum"): check every node, then at every node
// the local step and compression, post to the out-neighbours, collect round t's envelopes from the
// in-neighbours (every node posts before any node collects), and mix. Push-sum (one node or a
// group) and CHOCO-SGD supply the per-node steps; the sequence is written once, here. Also the
// requirements a round's policies must meet, checked where a user names the types.
#pragma once

#include <concepts>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <span>
#include <vector>

#include "../compress/common.hpp"
#include "../topology/schedule.hpp"
#include "../transport/endpoint.hpp"

namespace sparsepush {
inline namespace v0 {

namespace detail {
/// Runs per-node work on the calling thread, with thread_pool's interface (a node alone).
struct serial_runner {
  template <class F>
  void parallel_for(std::size_t n, F&& f) {
    for (std::size_t i = 0; i < n; ++i) f(i);
  }
  template <class F>
  void parallel_for_worker(std::size_t n, F&& f) {
    for (std::size_t i = 0; i < n; ++i) f(i, std::size_t{0});
  }
};

/// mix(i, w) at every node [0, n) on `pool`, even when one throws (a mix that overflows throws
/// once its node is mixed); then the error of the lowest such node is rethrown, so the round
/// stands complete at every node whatever the threads. No allocation unless a mix throws.
template <class Pool, class Mix>
void mix_every_node(Pool& pool, std::size_t n, Mix&& mix) {
  std::mutex mu;
  std::exception_ptr first;
  std::size_t first_node = n;
  pool.parallel_for_worker(n, [&](std::size_t i, std::size_t w) {
    try {
      mix(i, w);
    } catch (...) {
      std::lock_guard lock(mu);
      if (i < first_node) {
        first_node = i;
        first = std::current_exception();
      }
    }
  });
  if (first) std::rethrow_exception(first);
}

/// One lockstep round over nodes [0, n), running per-node work on `pool` (a thread_pool or
/// serial_runner; w names the thread, for per-thread scratch):
///   check(i, w)          every node, before any state changes (a throw changes nothing but
///                        scratch: a node may keep what it planned, see push_sum_node::prepare)
///   step(i, w)           local step and compression
///   post(i, ep)          in node order, ep = endpoint_of(i)
///   collect(i, ep)       in node order, on the calling thread (a network may need its calls on one)
///   mix(i, w)            every node, even when one throws (a mix that overflows throws once its
///                        node is mixed); then the error of the lowest such node is rethrown, so the
///                        round stands complete at every node whatever the threads
template <class Pool, class EndpointOf, class Check, class Step, class Post, class Collect, class Mix>
void lockstep_round(Pool& pool, std::size_t n, EndpointOf&& endpoint_of, Check&& check, Step&& step, Post&& post,
                    Collect&& collect, Mix&& mix) {
  pool.parallel_for_worker(n, check);
  pool.parallel_for_worker(n, step);
  for (std::size_t i = 0; i < n; ++i) {
    auto&& ep = endpoint_of(i);
    post(i, ep);
  }
  for (std::size_t i = 0; i < n; ++i) {
    auto&& ep = endpoint_of(i);
    collect(i, ep);
  }
  mix_every_node(pool, n, mix);
}

// What a round's policy types must offer, one member at a time, so that a type that misses one
// fails with one line naming it (a concept's own diagnostic is a wall under GCC 12).
template <class S>
concept has_out_edges = requires(const S& s, std::uint64_t round, std::uint32_t node, std::vector<out_edge>& out) {
  s.out_edges(round, node, out);
};
template <class S>
concept has_num_nodes = requires(const S& s) {
  { s.num_nodes() } -> std::convertible_to<std::size_t>;
};
template <class S>
concept has_period = requires(const S& s) {
  { s.period() } -> std::convertible_to<std::size_t>;
};
/// A network of node endpoints: endpoint(node) hands out node `node`'s endpoint (loopback, MPI).
template <class Net>
concept has_endpoint = requires(Net& net, std::uint32_t node) {
  { net.endpoint(node) } -> endpoint;
};

/// true; fails to compile, naming the missing member, unless C is a compressor for T.
template <class C, class T>
consteval bool require_compressor() {
  static_assert(compressor_for<C, T>,
                "sparsepush: the compressor type has no member compress(std::span<const T>, message&, const context&) "
                "const returning void (see compress/common.hpp, the compressor concept)");
  return true;
}

/// true; fails to compile, naming the missing member, unless S is a schedule.
template <class S>
consteval bool require_schedule() {
  static_assert(has_out_edges<S>,
                "sparsepush: the schedule type has no member out_edges(round, node, std::vector<out_edge>&) const "
                "(see topology/schedule.hpp, the schedule concept)");
  static_assert(has_num_nodes<S>, "sparsepush: the schedule type has no member num_nodes() const");
  static_assert(has_period<S>, "sparsepush: the schedule type has no member period() const");
  return true;
}

/// true; fails to compile, naming the missing member, unless Net is a network of endpoints.
template <class Net>
consteval bool require_network() {
  static_assert(has_endpoint<Net>,
                "sparsepush: the network type has no member endpoint(node) returning an endpoint (post, collect, "
                "node(); see transport/endpoint.hpp)");
  static_assert(has_num_nodes<Net>, "sparsepush: the network type has no member num_nodes() const");
  return true;
}
}  // namespace detail

}  // namespace v0
}  // namespace sparsepush
