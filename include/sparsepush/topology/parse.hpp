// sparsepush/topology/parse.hpp: a runtime-chosen schedule and the spec strings that name one:
//   directed-ring | undirected-ring | torus:RxC | complete | time-varying-ring[:h1,h2,...] |
//   alternating-ring | exponential | exponential:K (K peers a round) | bidirectional-exponential |
//   erdos-renyi:P | random:K (K random out-peers a round)
#pragma once

#include <charconv>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "exponential.hpp"
#include "random.hpp"
#include "rings.hpp"

namespace sparsepush {
inline namespace v0 {

/// Any built-in schedule, chosen at run time.
class any_schedule {
 public:
  /// The schedules it can hold.
  using variant_type = std::variant<periodic_schedule, random_out_peers>;
  /// Holds s, a periodic_schedule or random_out_peers (implicit, so either converts where an
  /// any_schedule is expected).
  template <class S>
    requires std::is_constructible_v<variant_type, S>
  any_schedule(S s) : impl_(std::move(s)) {}  // NOLINT: implicit by design

  /// The number of nodes n of the held schedule.
  std::size_t num_nodes() const {
    return std::visit([](const auto& s) { return s.num_nodes(); }, impl_);
  }
  /// The held schedule's period (0 when it does not repeat).
  std::size_t period() const {
    return std::visit([](const auto& s) { return s.period(); }, impl_);
  }
  /// Replaces out with column `node` of W(round) (the held schedule's out_edges).
  void out_edges(std::uint64_t round, std::uint32_t node, std::vector<out_edge>& out) const {
    std::visit([&](const auto& s) { s.out_edges(round, node, out); }, impl_);
  }
  /// Replaces out with row `node` of W(round) (the held schedule's in_edges).
  void in_edges(std::uint64_t round, std::uint32_t node, std::vector<in_edge>& out) const {
    std::visit([&](const auto& s) { s.in_edges(round, node, out); }, impl_);
  }
  /// Every round's mixing matrix is symmetric (doubly stochastic); a random schedule never is.
  bool symmetric() const {
    return std::visit([](const auto& s) {
      if constexpr (requires { s.symmetric(); }) return s.symmetric();
      else return false;
    }, impl_);
  }

 private:
  variant_type impl_;
};

namespace detail {
inline std::size_t parse_count(std::string_view s, std::string_view spec) {
  std::size_t v = 0;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || p != s.data() + s.size() || s.empty())
    throw schedule_error("schedule spec '" + std::string(spec) + "': '" + std::string(s) +
                         "' is not a whole number");
  return v;
}
}  // namespace detail

/// Build the schedule a spec names for n nodes (seed keys the random ones); validated.
inline any_schedule parse_schedule(std::string_view spec, std::size_t n, std::uint64_t seed = 0) {
  const std::size_t colon = spec.find(':');
  const std::string_view name = spec.substr(0, colon);
  const std::string_view arg = colon == std::string_view::npos ? std::string_view{} : spec.substr(colon + 1);
  auto no_arg = [&] {
    if (colon != std::string_view::npos)
      throw schedule_error("schedule spec '" + std::string(spec) + "': '" + std::string(name) +
                           "' takes no argument");
  };
  auto make = [&]() -> any_schedule {
    if (name == "directed-ring") return no_arg(), directed_ring(n);
    if (name == "undirected-ring") return no_arg(), undirected_ring(n);
    if (name == "complete") return no_arg(), complete(n);
    if (name == "alternating-ring") return no_arg(), alternating_ring(n);
    if (name == "bidirectional-exponential") return no_arg(), bidirectional_exponential(n);
    if (name == "exponential")
      return arg.empty() ? one_peer_exponential(n) : k_peer_exponential(n, detail::parse_count(arg, spec));
    if (name == "time-varying-ring") {
      std::vector<std::size_t> hops;
      for (std::string_view rest = arg; !rest.empty();) {
        const std::size_t comma = rest.find(',');
        hops.push_back(detail::parse_count(rest.substr(0, comma), spec));
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
      }
      return time_varying_ring(n, hops);
    }
    if (name == "torus") {
      const std::size_t x = arg.find('x');
      if (x == std::string_view::npos)
        throw schedule_error("schedule spec '" + std::string(spec) + "': torus needs RxC, e.g. torus:4x4");
      const std::size_t r = detail::parse_count(arg.substr(0, x), spec);
      const std::size_t c = detail::parse_count(arg.substr(x + 1), spec);
      if (r * c != n)
        throw schedule_error("schedule spec '" + std::string(spec) + "': a " + std::to_string(r) + "x" +
                             std::to_string(c) + " torus has " + std::to_string(r * c) +
                             " nodes, not " + std::to_string(n));
      return torus(r, c);
    }
    if (name == "erdos-renyi") {
      double p = 0;
      const auto [ptr, ec] = std::from_chars(arg.data(), arg.data() + arg.size(), p);
      if (ec != std::errc{} || ptr != arg.data() + arg.size() || arg.empty())
        throw schedule_error("schedule spec '" + std::string(spec) + "': erdos-renyi needs a probability, e.g. erdos-renyi:0.3");
      return erdos_renyi_directed(n, p, seed);
    }
    if (name == "random") {
      if (arg.empty()) throw schedule_error("schedule spec '" + std::string(spec) + "': random needs K, e.g. random:1");
      return random_out_peers(n, detail::parse_count(arg, spec), seed);
    }
    throw schedule_error("unknown schedule '" + std::string(name) +
                         "' (known: directed-ring, undirected-ring, torus:RxC, complete, "
                         "time-varying-ring[:hops], alternating-ring, exponential[:K], "
                         "bidirectional-exponential, erdos-renyi:P, random:K)");
  };
  any_schedule s = make();
  validate_schedule(s);
  return s;
}

}  // namespace v0
}  // namespace sparsepush
