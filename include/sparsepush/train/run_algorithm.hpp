// sparsepush/train/run_algorithm.hpp: the algorithm a run_spec names, built for this process's
// nodes: centralized all-reduce, CHOCO-SGD, CHOCO-Push, or Sparse-Push with the spec's phases (SP, SCSP, SGP,
// D-PSGD, DeepSqueeze), its compressor (top-K per layer with --per-layer), consensus steps,
// message loss, loss recovery and waiting policy, over its own loopback network or one the caller
// gives (MPI, an exchange_network). run_reference() trains it with the trainer; gossip_run.hpp
// drives it with the caller's own local steps (sparsepush.torch.GossipOptimizer).
#pragma once

#include <cstdint>
#include <memory>
#include <type_traits>
#include <variant>
#include <vector>

#include "../algorithm/centralized.hpp"
#include "../algorithm/choco.hpp"
#include "../algorithm/choco_push.hpp"
#include "../algorithm/phases.hpp"
#include "../algorithm/sparse_push.hpp"
#include "../algorithm/tracking.hpp"
#include "run_spec.hpp"

namespace sparsepush {
inline namespace v0 {

/// The network type of an algorithm over Net (void: its own loopback_network).
template <class Net>
using run_network_t = std::conditional_t<std::is_void_v<Net>, loopback_network, Net>;

/// One of the algorithms a run can use, over network Net (void: its own loopback).
template <class Net = void>
using run_algorithm = std::variant<std::unique_ptr<centralized<float>>,
                                   std::unique_ptr<choco<float, any_compressor, any_schedule, run_network_t<Net>>>,
                                   std::unique_ptr<choco_push<float, any_compressor, any_schedule, run_network_t<Net>>>,
                                   std::unique_ptr<sparse_push<float, any_compressor, any_schedule, run_network_t<Net>>>,
                                   std::unique_ptr<tracking<choco_push<float, any_compressor, any_schedule, run_network_t<Net>>>>,
                                   std::unique_ptr<tracking<sparse_push<float, any_compressor, any_schedule, run_network_t<Net>>>>>;

/// What an algorithm needs besides the spec.
struct run_layout {
  /// Rounds of the training phase: SCSP's final rounds come after them.
  std::uint32_t train_rounds = 0;
  /// SCSP's final rounds (0 for every other algorithm).
  std::uint32_t final_rounds = 0;
  /// Where each layer's parameters start in the flat model (ascending; --per-layer cuts top-K
  /// there). Offsets at or past the model's end are ignored; 0 is added when missing.
  std::vector<std::size_t> layer_offsets;
  /// Every node of the run starts from the same model (sparsepush-train's do; a torch rank's may
  /// not): CHOCO-Push's link references then start there (choco_push_options::common_start).
  bool common_start = false;
};

/// The per-layer top-K of `c` (a top_k: validate() refuses --per-layer with any other
/// compressor), its segments starting at the layers of a model of d parameters.
inline any_compressor per_layer_compressor(const any_compressor& c, std::span<const std::size_t> layer_offsets,
                                           std::size_t d) {
  const top_k* whole = std::get_if<top_k>(&c.get());
  if (!whole) throw config_error("--per-layer takes a top-k compressor");
  top_k per = *whole;
  for (const std::size_t off : layer_offsets)
    if (off < d && (per.segments.empty() || off > per.segments.back())) per.segments.push_back(off);
  if (per.segments.empty() || per.segments.front() != 0) per.segments.insert(per.segments.begin(), 0);
  return per;
}

/// Gradient tracking around algorithm A: A built by make(x0) (net null: over a loopback of its
/// own) or make(x0, network) from the models x0 and, for the trackers, from zero models. Over
/// `net` the algorithm sends over it and the trackers over net->twin(), a second network of the
/// same nodes whose messages never meet the first's (MPI: a communicator of its own, a collective
/// call; a shared loopback's node: its companion network; an exchange network: the same function
/// in calls of its own), which the tracking object keeps; a network without one is a config_error.
template <class A, class Net, class Make>
std::unique_ptr<tracking<A>> make_tracking(std::vector<std::vector<float>> x0, Net* net, Make&& make) {
  std::vector<std::vector<float>> zeros(x0.size(), std::vector<float>(x0.empty() ? 0 : x0[0].size(), 0.0f));
  if constexpr (std::is_void_v<Net>) {
    auto x = make(std::move(x0));
    auto y = make(std::move(zeros));
    return std::make_unique<tracking<A>>(std::move(x), std::move(y));
  } else if constexpr (requires { net->twin(); }) {
    auto y_net = net->twin();
    auto x = make(std::move(x0), *net);
    auto y = make(std::move(zeros), *y_net);
    return std::make_unique<tracking<A>>(std::move(x), std::move(y), std::move(y_net));
  } else {
    throw config_error("--tracking: the trackers need a network of their own, which this network cannot build "
                       "(MPI's, an exchange network's and a shared loopback's node's can; one process's loopback too)");
  }
}

/// The algorithm of a validated spec for the nodes whose initial models are x0: every node of the
/// run over its own loopback (net null, Net void, or an in-process-only algorithm), or the nodes
/// that `net` places in this process (the network must outlive the algorithm).
template <class Net = void>
run_algorithm<Net> make_run_algorithm(const run_spec& s, std::vector<std::vector<float>> x0, const run_layout& layout,
                                      [[maybe_unused]] Net* net = nullptr) {
  using net_t = run_network_t<Net>;
  if (x0.empty()) throw config_error("an algorithm needs at least one node's model");
  const algorithm_info& a = s.info();
  if (!a.graph) return std::make_unique<centralized<float>>(std::move(x0[0]), s.nodes, s.threads_value());
  const auto sched = parse_schedule(s.schedule_spec(), s.nodes, s.seed);
  any_compressor comp = parse_compressor(s.compressor_spec());
  if (a.kind == algorithm_kind::choco_push) {
    if (s.per_layer) comp = per_layer_compressor(comp, layout.layer_offsets, x0[0].size());
    choco_push_options co{.consensus_step = s.consensus_step_value(), .compressor = comp,
                          .threads = s.threads_value(), .seed = s.seed,
                          .network = {.seed = s.seed, .max_delay = s.max_delay_value()},
                          .common_start = layout.common_start};
    co.policy = s.policy();
    if (s.final_phase()) {  // --final-rounds: the rounds from the layout's train_rounds on
      co.final_from = layout.train_rounds;
      co.final_compressor = parse_compressor(s.final_compressor_spec());
      co.final_consensus_step = *s.final_eta_value();
    }
    using choco_push_t = choco_push<float, any_compressor, any_schedule, net_t>;
    if (s.tracking)
      return make_tracking<choco_push_t>(std::move(x0), net, [&](auto x, auto&... on) {
        return std::make_unique<choco_push_t>(std::move(x), sched, on..., co);
      });
    if constexpr (std::is_void_v<Net>) return std::make_unique<choco_push_t>(std::move(x0), sched, co);
    else return std::make_unique<choco_push_t>(std::move(x0), sched, *net, co);
  }
  if (a.keeps_neighbour_copies) {
    const choco_options co{.consensus_step = s.consensus_step_value(), .compressor = comp, .threads = s.threads_value(),
                           .seed = s.seed};
    using choco_t = choco<float, any_compressor, any_schedule, net_t>;
    if constexpr (std::is_void_v<Net>) return std::make_unique<choco_t>(std::move(x0), sched, co);
    else return std::make_unique<choco_t>(std::move(x0), sched, *net, co);
  }
  if constexpr (!std::is_void_v<Net> && requires { net->loss().probability; })
    if (net && s.drop_value() != net->loss().probability)  // the network's own loss model decides what is lost
      throw config_error("--drop-probability " + run_settings::exact(s.drop_value()) + ": the network was built with " +
                         run_settings::exact(net->loss().probability) + " (a network that injects no loss has 0)");
  if (s.per_layer) comp = per_layer_compressor(comp, layout.layer_offsets, x0[0].size());
  const double eta = s.eta_value();
  const auto phases = a.final_rounds ? scsp_phases(comp, eta, layout.train_rounds, parse_compressor(s.final_compressor_spec()),
                                                   *s.final_eta_value(), layout.final_rounds)
                                     : sparse_push_phases(comp, eta);
  const sparse_push_options so{.threads = s.threads_value(), .seed = s.seed,
                               .network = {.drop_probability = s.drop_value(), .seed = s.seed,
                                           .max_delay = s.max_delay_value()},
                               .recovery = s.loss_recovery_mode(),
                               .policy = s.policy()};
  using sp_t = sparse_push<float, any_compressor, any_schedule, net_t>;
  if (s.tracking)
    return make_tracking<sp_t>(std::move(x0), net, [&](auto x, auto&... on) {
      return std::make_unique<sp_t>(std::move(x), sched, phases, on..., so);
    });
  if constexpr (std::is_void_v<Net>) return std::make_unique<sp_t>(std::move(x0), sched, phases, so);
  else return std::make_unique<sp_t>(std::move(x0), sched, phases, *net, so);
}

}  // namespace v0
}  // namespace sparsepush
