// sparsepush/algorithm/sparse_push.hpp: Sparse-Push and everything that is a configuration of it
// (ALGORITHMS.md): one round at every node i, with the phase active in round t,
//   1. local update:  p_i = oracle(xh_i),  x_i' = x_i - gamma p_i          (if the phase trains)
//   2. communication: v_i = x_i' + e_i,  q_i = C(v_i),  e_i <- v_i - q_i,  push q_i, u_i, W[r][i]
//   3. gossip:        x_i <- x_i' + eta (sum_j W_ij q_j - q_i),  u_i <- u_i + eta (sum_j W_ij u_j - u_i)
// SGP = identity C, eta = 1; D-PSGD = SGP on a symmetric doubly stochastic schedule;
// DeepSqueeze = SP on a symmetric doubly stochastic schedule (u stays 1); SCSP = phases. In exact
// phases (identity in full precision) the residual is left alone: x_i <- sum_j W_ij x_j.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "../gossip/group.hpp"
#include "../topology/parse.hpp"
#include "../topology/validate.hpp"
#include "../transport/in_process.hpp"
#include "oracle.hpp"
#include "phases.hpp"

namespace sparsepush {
inline namespace v0 {

/// Settings of a Sparse-Push run that are not the phases.
struct sparse_push_options {
  std::size_t threads = 1;
  std::uint64_t seed = 0;               ///< keys random compressors (with node and round)
  in_process_options network{};         ///< message loss and tracing of the embedded transport
};

/// n nodes running Sparse-Push (or SGP, D-PSGD, DeepSqueeze, SCSP) in one process.
template <tensor_element T>
class sparse_push {
 public:
  sparse_push(std::vector<std::vector<T>> x0, any_schedule sched, phase_schedule phases,
              sparse_push_options opt = {})
      : sched_(std::move(sched)), phases_(std::move(phases)),
        group_(check_nodes(std::move(x0), sched_),
               gossip_options{1.0, needs_feedback(phases_), opt.threads, opt.seed}),
        net_(group_.num_nodes(), opt.network),
        dirs_(group_.num_nodes(), std::vector<T>(group_.dim())),
        xh_(group_.num_nodes(), std::vector<T>(group_.dim())) {
    validate_schedule(sched_);
  }

  /// One round t with learning rate gamma.
  void round(std::uint32_t t, const gradient_oracle<T>& oracle, double gamma) {
    const phase& ph = phases_.at(t);
    // Exact phases (identity in full precision, e.g. SCSP's final gossip) are plain push-sum of x:
    // x_i <- sum_j W_ij x_j; the residual is neither sent nor changed.
    typename push_sum_group<std::vector<T>>::step st{ph.eta, {}, gamma, !exact(ph.compressor)};
    if (ph.local_step) {
      group_.for_each_node([&](std::size_t i) {
        group_.debiased(i, xh_[i]);
        std::fill(dirs_[i].begin(), dirs_[i].end(), T(0));
        oracle(static_cast<std::uint32_t>(i), t, xh_[i], dirs_[i]);
      });
      st.directions = dirs_;
    }
    group_.round(sched_, ph.compressor, net_, t, st);
  }

  std::size_t num_nodes() const noexcept { return group_.num_nodes(); }
  std::size_t dim() const noexcept { return group_.dim(); }
  /// The de-biased model xh_i = x_i / u_i.
  std::vector<T> model(std::size_t i) const { return group_.debiased(i); }
  const push_sum_group<std::vector<T>>& group() const noexcept { return group_; }
  const in_process_network& network() const noexcept { return net_; }
  const phase_schedule& phases() const noexcept { return phases_; }
  /// Bytes of persistent state per node: x, e (when kept), u and the outgoing message.
  std::size_t state_bytes(std::size_t i) const { return group_.state_bytes(i); }
  std::size_t bytes_sent() const noexcept { return net_.total_bytes(); }
  std::size_t messages_sent() const noexcept { return net_.total_messages(); }
  /// What the messages sent would cost as fp32 vectors: 4 d bytes each.
  std::size_t full_precision_bytes() const noexcept { return 4 * dim() * net_.total_messages(); }

 private:
  /// Error feedback is kept unless every phase sends values exactly (identity in the tensor's
  /// own precision), where e would stay 0: SGP and D-PSGD then keep no residual.
  static bool exact(const any_compressor& c) {
    const auto* id = std::get_if<identity>(&c.get());
    return id && (id->values.encoding == value_encoding::native ||
                  id->values.encoding == detail::native_encoding<T>);
  }
  static bool needs_feedback(const phase_schedule& ps) {
    for (const auto& ph : ps.phases())
      if (!exact(ph.compressor)) return true;
    return false;
  }

  static std::vector<std::vector<T>> check_nodes(std::vector<std::vector<T>> x0, const any_schedule& s) {
    if (s.num_nodes() != x0.size())
      throw schedule_error("schedule has " + std::to_string(s.num_nodes()) + " nodes but " +
                           std::to_string(x0.size()) + " models were given");
    return x0;
  }

  any_schedule sched_;
  phase_schedule phases_;
  push_sum_group<std::vector<T>> group_;
  in_process_network net_;
  std::vector<std::vector<T>> dirs_, xh_;
};

}  // namespace v0
}  // namespace sparsepush
