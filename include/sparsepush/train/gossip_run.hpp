// sparsepush/train/gossip_run.hpp: a run's algorithm (run_algorithm.hpp) driven by a training
// loop the caller owns, e.g. a torch optimizer (sparsepush.torch.GossipOptimizer). The caller
// keeps node i's model in a buffer of its own: the de-biased model xh_i = x_i / u_i, which its
// optimizer changes in place. step() lands that change on the numerator as the direction of SP's
// local update with gamma = 1 (the optimizer applied its own learning rate):
//   p_i = xh_i - model_i,   x_i' = x_i - p_i,
// then runs round t's compression and mix (docs/design/algorithms.md, Sparse-Push steps 2-3; CHOCO-SGD's and
// the all-reduce's rounds likewise) and writes the new xh_i back into the buffer. Under gradient
// tracking, track() first swaps the caller's gradient for the tracker the optimizer steps along,
// and step() also runs the trackers' round. finish() runs
// the final rounds (SCSP's, or choco-push's given --final-rounds: the count it gives, or auto's at
// the round they start) and mixes what a waiting policy left in flight. save()/restore() carry everything a
// resumed loop needs to continue bit for bit: the round, x, u, e, the policy's expectations and
// the byte ledger (the caller saves its optimizer's state beside it).
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "../checkpoint.hpp"
#include "run_algorithm.hpp"
#include "run_final_rounds.hpp"

namespace sparsepush {
inline namespace v0 {

/// The algorithm of a spec over this process's nodes, stepped by the caller's optimizer.
template <class Net = void>
class gossip_run {
 public:
  /// Rounds of the training phase as the phase schedule counts them: step() may run this many.
  /// finish() runs the final rounds as phase rounds from here on, whatever round they are
  /// (the schedule and the compressors' random streams keep counting the rounds themselves).
  static constexpr std::uint32_t training_rounds = 1u << 31;

  /// The nodes of `net` in this process (all of them when Net is void, or for centralized), their
  /// initial models x0 (x0[k] is node first_node() + k's). layer_offsets: where each layer of the
  /// flat model starts (--per-layer). The spec must be validated (run_spec::validate).
  gossip_run(const run_spec& s, std::vector<std::vector<float>> x0, std::vector<std::size_t> layer_offsets,
             [[maybe_unused]] Net* net = nullptr)
      : spec_(s), fingerprint_(s.fingerprint(x0.empty() ? 0 : x0[0].size()).text()) {
    if (x0.empty()) throw config_error("a gossip run needs at least one node's model");
    for (std::size_t k = 1; k < x0.size(); ++k)
      if (x0[k].size() != x0[0].size())
        throw size_error("node " + std::to_string(k) + "'s model has " + std::to_string(x0[k].size()) +
                         " parameters, node 0's " + std::to_string(x0[0].size()));
    // the training phase, then (SCSP, choco-push given --final-rounds) as many final rounds as any finish() may run
    run_layout layout{.train_rounds = training_rounds, .final_rounds = s.final_phase() ? training_rounds - 1 : 0,
                      .layer_offsets = std::move(layer_offsets)};
    alg_ = make_run_algorithm<Net>(s, std::move(x0), layout, net);
    std::visit([&](auto& a) { local_ = a->num_nodes(); dim_ = a->dim(); }, alg_);
    scratch_.assign(local_, std::vector<float>(dim_));
  }

  /// Nodes this process runs (one model buffer each, in order) and their first node's number.
  std::size_t local_nodes() const noexcept { return local_; }
  /// The schedule's index of the first node this process runs.
  std::uint32_t first_node() const {
    return std::visit([](const auto& a) -> std::uint32_t {
      if constexpr (requires { a->first_node(); }) return a->first_node();
      else return 0;
    }, alg_);
  }
  /// The number of elements d of every model buffer.
  std::size_t dim() const noexcept { return dim_; }
  /// The next round to run.
  std::uint32_t round() const noexcept { return round_; }
  /// Did finish() run (step() is refused after it)?
  bool finished() const noexcept { return finished_; }
  /// SCSP's final rounds that finish() ran (0 before it, and for other algorithms).
  std::uint32_t final_rounds() const noexcept { return final_rounds_; }
  /// The run_spec the run was built from.
  const run_spec& spec() const noexcept { return spec_; }

  /// Gradient tracking (spec().tracking), round t = round(), before the optimizer's step:
  /// grads[k] holds node first_node() + k's gradient g(t) at its model; it gets the tracker
  /// y + g(t) - g(t-1) (algorithm/tracking.hpp), which the optimizer then steps along in place of
  /// the gradient. Everything is checked first (sizes: size_error; NaN/Inf: non_finite_error
  /// naming the node, the round and the index): on an error nothing changed. A second call in the
  /// same round replaces the first's gradients. A run that does not track refuses it.
  void track(std::span<const std::span<float>> grads) {
    check_trains();
    if (!spec_.tracking)
      throw config_error("round " + std::to_string(round_) + ": track(): this run does not track gradients (its spec "
                         "has tracking off)");
    check_buffers(grads, "gradient");
    for (std::size_t k = 0; k < local_; ++k)
      detail::check_finite(std::span<const float>(grads[k]),
                           context{0, first_node() + static_cast<std::uint32_t>(k), round_}, "gradient");
    std::visit(
        [&](auto& a) {
          if constexpr (requires { a->gradient(0); })
            for (std::size_t k = 0; k < local_; ++k) {
              std::ranges::copy(grads[k], a->gradient(k).begin());
              a->tracker(k, grads[k]);
            }
        },
        alg_);
    tracked_ = round_;
  }

  /// Round t = round(): models[k] holds node first_node() + k's model after its optimizer's step;
  /// it gets the mixed de-biased model. Everything is checked first (sizes, NaN/Inf: size_error,
  /// non_finite_error naming the node and the round; under tracking, a round whose track() was
  /// not called: config_error): on an error nothing changed.
  void step(std::span<const std::span<float>> models) {
    check_trains();
    check_models(models);
    if (spec_.tracking && tracked_ != round_)
      throw config_error("round " + std::to_string(round_) + ": a run that tracks gradients takes this round's "
                         "gradients before its step: call track() first (GossipOptimizer.step() does)");
    std::visit(
        [&](auto& a) {
          views_.clear();
          for (std::size_t k = 0; k < local_; ++k) {  // p_k = xh_k - model_k
            a->model(k, scratch_[k]);
            float* p = scratch_[k].data();
            const float* m = models[k].data();
            for (std::size_t j = 0; j < dim_; ++j) p[j] -= m[j];
            views_.emplace_back(scratch_[k]);
          }
          a->round(round_, std::span<const std::span<const float>>(views_), 1.0);
          for (std::size_t k = 0; k < local_; ++k) a->model(k, models[k]);
        },
        alg_);
    ++round_;
  }

  /// The final rounds (no local step), then a drain of every envelope in flight, and the final
  /// de-biased models into `models`. Collective over the processes of the run. A second call only
  /// writes the models. Returns the final rounds run.
  std::uint32_t finish(std::span<const std::span<float>> models) {
    check_models(models);
    if (!finished_) {
      std::visit([&](auto& a) { finish_with(*a); }, alg_);
      finished_ = true;
    }
    write_models(models);
    return final_rounds_;
  }

  /// The de-biased models into `models` (one buffer of dim() per local node).
  void write_models(std::span<const std::span<float>> models) const {
    check_models(models);
    std::visit([&](const auto& a) { for (std::size_t k = 0; k < local_; ++k) a->model(k, models[k]); }, alg_);
  }

  /// u of local node k (1 for CHOCO and centralized, whose nodes keep no weight).
  double weight(std::size_t k) const {
    return std::visit([&](const auto& a) -> double {
      if constexpr (keeps_push_sum_weights<std::remove_cvref_t<decltype(*a)>>) return push_sum_node_of(*a, k).u();
      else return 1.0;
    }, alg_);
  }
  /// Bytes and envelopes sent by this process's nodes, envelopes lost, the largest staleness mixed.
  std::size_t bytes_sent() const { return std::visit([](const auto& a) -> std::size_t { return a->bytes_sent(); }, alg_); }
  /// Bytes local node k has sent (the process's bytes where its network keeps no per-node count).
  std::size_t bytes_sent(std::size_t k) const {
    return std::visit([&](const auto& a) -> std::size_t {
      if constexpr (requires { a->network().bytes_sent(0u); })
        return a->network().bytes_sent(static_cast<std::uint32_t>(a->first_node() + k));
      else return a->bytes_sent();
    }, alg_);
  }
  /// Bytes of state local node k keeps beside the caller's model: the algorithm's (its numerator,
  /// weight, residuals or references, and a tracker's instance) and the run's scratch copy.
  std::size_t state_bytes(std::size_t k) const {
    return std::visit([&](const auto& a) -> std::size_t { return a->state_bytes(k); }, alg_) + dim_ * sizeof(float);
  }
  /// Envelopes local node k has sent (the process's where its network keeps no per-node count).
  std::size_t messages_sent(std::size_t k) const {
    return std::visit([&](const auto& a) -> std::size_t {
      if constexpr (requires { a->network().messages_sent(0u); })
        return a->network().messages_sent(static_cast<std::uint32_t>(a->first_node() + k));
      else if constexpr (requires { a->messages_sent(); }) return a->messages_sent();
      else return 0;
    }, alg_);
  }
  /// Envelopes sent by this process's nodes (0 for the all-reduce, which sends none).
  std::size_t messages_sent() const {
    return std::visit([](const auto& a) -> std::size_t {
      if constexpr (requires { a->messages_sent(); }) return a->messages_sent();
      else return 0;
    }, alg_);
  }
  /// Envelopes of this process's nodes that the network lost.
  std::size_t messages_dropped() const {
    return std::visit([](const auto& a) -> std::size_t {
      if constexpr (requires { a->messages_dropped(); }) return a->messages_dropped();
      else return 0;
    }, alg_);
  }
  /// The largest staleness mixed by this process's nodes (0 under lockstep).
  std::uint32_t max_staleness() const {
    return std::visit([](const auto& a) -> std::uint32_t {
      if constexpr (requires { a->max_staleness(); }) return a->max_staleness();
      else return 0;
    }, alg_);
  }

  /// Checkpoint (section "GRUN"): the spec's fingerprint, the round, finish()'s state and the
  /// algorithm's nodes and ledger. Under a waiting policy other than lockstep the envelopes in
  /// flight are mixed first (a drain: collective over the processes), so that what is saved is
  /// complete; the models the caller holds are then stale: call write_models().
  void save(checkpoint_writer& w) {
    std::visit([](auto& a) { if constexpr (requires { a->drain(); }) a->drain(); }, alg_);
    w.section("GRUN");
    w.str(fingerprint_);
    w.u32(round_);
    w.u32(finished_ ? 1 : 0);
    w.u32(final_rounds_);
    std::visit([&](const auto& a) { a->save(w); }, alg_);
  }
  /// Restore what save() wrote; a checkpoint of other settings, or a truncated or corrupted one,
  /// is a checkpoint_error and changes nothing.
  void restore(checkpoint_reader& r) {
    r.section("GRUN");
    const std::string fp = r.str("settings");
    if (fp != fingerprint_) r.fail("was written with other settings: " + fp + " (now " + fingerprint_ + ")");
    const std::uint32_t round = r.u32("round"), finished = r.u32("finished"), final_rounds = r.u32("final rounds");
    if (finished > 1) r.fail("holds a finished flag of " + std::to_string(finished) + " (corrupted)");
    std::visit([&](auto& a) { a->restore(r); }, alg_);
    round_ = round;
    finished_ = finished != 0;
    final_rounds_ = final_rounds;
  }

 private:
  void check_trains() const {
    if (finished_)
      throw config_error("round " + std::to_string(round_) + ": this run's finish() ran already; a run that trains on "
                         "needs a new optimizer");
    if (round_ >= training_rounds)
      throw config_error("round " + std::to_string(round_) + ": a gossip run takes at most 2^31 training rounds");
  }
  void check_models(std::span<const std::span<float>> models) const { check_buffers(models, "model"); }
  void check_buffers(std::span<const std::span<float>> buffers, const char* what) const {
    if (buffers.size() != local_)
      throw size_error("round " + std::to_string(round_) + ": " + std::to_string(buffers.size()) + " " + what +
                       " buffers for " + std::to_string(local_) + " nodes in this process");
    for (std::size_t k = 0; k < local_; ++k)
      if (buffers[k].size() != dim_)
        throw size_error("round " + std::to_string(round_) + ", node " + std::to_string(first_node() + k) + ": the " +
                         what + " buffer has " + std::to_string(buffers[k].size()) + " elements, the run's model " +
                         std::to_string(dim_));
  }

  template <class A>
  void finish_with(A& a) {
    if constexpr (requires { a.round(round_, std::span<const std::span<const float>>(), 0.0, training_rounds, true); }) {
      if (spec_.final_phase()) {  // SCSP's, or choco-push's given --final-rounds
        final_rounds_ = final_rounds_of(spec_, a.mixing_schedule(), round_).rounds;
        for (std::uint32_t j = 0; j < final_rounds_; ++j, ++round_)
          a.round(round_, std::span<const std::span<const float>>(), 0.0, training_rounds + j, true);
      }
    }
    if constexpr (requires { a.drain(); }) a.drain();
  }

  run_spec spec_;
  std::string fingerprint_;
  run_algorithm<Net> alg_;
  std::size_t local_ = 0, dim_ = 0;
  std::vector<std::vector<float>> scratch_;
  std::vector<std::span<const float>> views_;
  std::uint32_t round_ = 0, final_rounds_ = 0;
  std::int64_t tracked_ = -1;  ///< the round whose gradients track() took (tracking)
  bool finished_ = false;
};

}  // namespace v0
}  // namespace sparsepush
