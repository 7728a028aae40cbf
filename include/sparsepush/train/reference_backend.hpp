// sparsepush/train/reference_backend.hpp: the reference backend of a run_spec on Fashion-MNIST:
// each node's label-skewed (or Dirichlet) shard drawn by a seeded sampler, momentum SGD over the
// nn model (p_i is the momentum buffer; Nesterov keeps its own), the learning-rate schedule, the
// stragglers' and jitter's slowed steps, test accuracy, and the checkpoint hooks of its state.
// reference_plan works out the shards and the round counts before any collective.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include "../clock.hpp"
#include "../data/idx.hpp"
#include "../data/partition.hpp"
#include "../data/shard.hpp"
#include "../nn/model.hpp"
#include "../nn/optimizer.hpp"
#include "run_final_rounds.hpp"
#include "run_spec.hpp"
#include "trainer.hpp"

namespace sparsepush {
inline namespace v0 {

/// The four files of a Fashion-MNIST directory (what --data names).
inline const std::vector<std::string>& fashion_mnist_files() {
  static const std::vector<std::string> files(fashion_mnist_file_names.begin(), fashion_mnist_file_names.end());
  return files;
}

/// What a run is made of once its data is known: the shards, the round counts and SCSP's
/// final-rounds plan.
struct reference_plan {
  partition parts;  ///< each node's training samples
  std::size_t per_node = 0;  ///< training images per node (for epochs)
  ///@{
  /// Rounds with local steps (train_rounds), then SCSP's uncompressed final rounds (final_rounds).
  std::uint32_t train_rounds = 0, final_rounds = 0;
  ///@}
  std::uint32_t local_steps = 1;  ///< H: minibatches per node in a training round
  final_rounds_plan plan;    ///< SCSP with --final-rounds auto: the count and its bound
  /// The rounds of the run: train_rounds + final_rounds.
  std::uint32_t rounds() const noexcept { return train_rounds + final_rounds; }
  /// The epochs over each node's shard that `rounds` training rounds of `batch` (H minibatches
  /// each) make.
  double epochs_after(std::uint32_t rounds, std::size_t batch) const noexcept {
    return static_cast<double>(rounds) * local_steps * static_cast<double>(batch) / static_cast<double>(per_node);
  }
  /// The same for a count of one node's local steps.
  double epochs_after_steps(double steps, std::size_t batch) const noexcept {
    return steps * static_cast<double>(batch) / static_cast<double>(per_node);
  }
};

/// The plan of a validated spec on its training set; config_error for a node without samples, a
/// round count past 32 bits or a warm-up longer than training.
inline reference_plan plan_reference_run(const run_spec& s, const labelled_images& train) {
  const std::size_t n = s.nodes;
  const bool scsp = s.final_phase();
  reference_plan p;
  p.parts = s.dirichlet ? partition_dirichlet(train.labels, n, *s.dirichlet, s.seed)
                        : partition_skewed(train.labels, n, s.skew_value(), s.seed);
  for (std::size_t i = 0; i < n; ++i)
    if (p.parts[i].empty())
      throw config_error("node " + std::to_string(i) + " received no training samples; raise --dirichlet alpha or use fewer nodes");
  p.per_node = train.count / n;
  // rounds are 32-bit: check the arithmetic before converting
  constexpr double max_rounds = max_run_rounds;
  // H local steps a round: the rounds that make --epochs (at least one), whose local steps the
  // learning-rate schedule counts in 32 bits too
  p.local_steps = s.local_steps;
  const double H = s.local_steps;
  const double want =
      std::max(1.0, std::round(s.epochs * static_cast<double>(p.per_node) / (static_cast<double>(s.batch) * H)));
  if (want * H > max_rounds)
    throw config_error("--epochs " + std::to_string(s.epochs) + " gives " + std::to_string(want) + " rounds of " +
                       std::to_string(s.local_steps) + " local steps, more than the " + std::to_string(max_run_rounds) + " steps a run can count");
  p.train_rounds = static_cast<std::uint32_t>(want);
  if (scsp) {  // SCSP: the count given, or auto's fewest exact rounds within --final-tolerance
    const final_rounds_plan f = final_rounds_of(s, p.train_rounds);
    if (s.final_rounds_auto()) p.plan = f;
    p.final_rounds = f.rounds;
  }
  if (scsp && static_cast<double>(p.train_rounds) + p.final_rounds > max_rounds)
    throw config_error("--final-rounds " + std::to_string(p.final_rounds) + " after " + std::to_string(p.train_rounds) +
                       " training rounds exceeds the " + std::to_string(max_run_rounds) + " rounds a run can count");
  if (s.warmup > std::uint64_t{p.train_rounds} * s.local_steps)
    throw config_error("--warmup " + std::to_string(s.warmup) + " is longer than the " +
                       (s.local_steps > 1 ? std::to_string(std::uint64_t{p.train_rounds} * s.local_steps) +
                                                " local steps of training (" + std::to_string(p.train_rounds) +
                                                " rounds of " + std::to_string(s.local_steps) + ")"
                                          : std::to_string(p.train_rounds) + " training rounds"));
  return p;
}

/// The learning-rate schedule of a spec (--lr, --lr-schedule, --warmup).
inline nn::lr_schedule reference_lr(const run_spec& s) {
  using k = nn::lr_schedule::kind;
  return nn::lr_schedule{s.lr, s.lr_schedule == "cosine" ? k::cosine : s.lr_schedule == "constant" ? k::constant : k::step,
                         s.warmup};
}

/// The rate of local step t under schedule lr (reference_lr): the schedule spans every local step
/// of the run's training rounds.
inline double reference_lr_at(const nn::lr_schedule& lr, const run_spec& s, std::uint32_t train_rounds, std::uint32_t t) {
  return lr.at(t, train_rounds * s.local_steps);
}

/// --jitter's draw for node i's step of round t: uniform in [0, 1), a pure function of (seed, i,
/// t) (splitmix64), so that every run, transport and thread count slows the same steps alike.
inline double jitter_draw(std::uint64_t seed, std::uint32_t i, std::uint32_t t) {
  std::uint64_t z = seed ^ (std::uint64_t{i} << 32 | t) ^ 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * 0x1p-53;
}

/// The seed of node i's shard sampler.
inline std::uint64_t shard_seed(std::uint64_t seed, std::size_t i) { return seed * 1000003u + i; }

/// The state of the nodes [first, first + local) of a reference run and the hooks the trainer
/// calls (hooks()). Not copyable: the hooks point into it.
class reference_backend {
 public:
  /// The nodes [first, first + local) of the run s with plan p over the Fashion-MNIST data fm and the
  /// model net (fm and net must outlive the backend); each node's model buffer has net's parameters.
  reference_backend(const run_spec& s, const reference_plan& p, const fashion_mnist& fm, const nn::model& net,
                    std::uint32_t first, std::size_t local)
      : s_(s), fm_(&fm), net_(&net), first_(first), local_(local), d_(net.num_params()), in_(net.input_size()),
        train_rounds_(p.train_rounds), bits_(s.bits_value()), opt_{s.momentum, s.nesterov, s.weight_decay},
        quasi_global_(s.quasi_global()), lr_(reference_lr(s)), velocity_(local, std::vector<float>(d_, 0.0f)),
        dirs_(s.nesterov || quasi_global_ ? local : 0, std::vector<float>(d_)), previous_(quasi_global_ ? local : 0),
        previous_lr_(previous_.size(), 0.0),
        work_(std::max<std::size_t>(1, s.threads_value())), eval_ws_(std::max<std::size_t>(1, s.threads_value())),
        slowdown_(s.nodes, 1.0) {
    for (std::size_t i = 0; i < s.nodes; ++i) shards_.emplace_back(p.parts[i], shard_seed(s.seed, i));
    for (const straggler& st : s.stragglers()) std::fill(slowdown_.begin() + st.first, slowdown_.begin() + st.last + 1, st.factor);
  }
  reference_backend(const reference_backend&) = delete;
  reference_backend& operator=(const reference_backend&) = delete;

  /// The round a resume starts at (set before restore runs: momentum is empty after training).
  void resuming_at(std::uint32_t round) noexcept { resume_round_ = round; }

  /// The trainer's hooks over this state.
  local_training<float> hooks() {
    local_training<float> b;
    b.step = [this](std::size_t w, std::uint32_t i, std::uint32_t t, std::span<const float> model, std::span<float> dir) {
      return step(w, i, t, model, dir);
    };
    b.direction = [this](std::uint32_t i) {
      return dirs_.empty() ? std::span<float>(velocity_[i - first_]) : std::span<float>(dirs_[i - first_]);
    };
    b.gradient = [this](std::size_t w, std::uint32_t i, std::uint32_t t, std::span<const float> model, std::span<float> g) {
      const auto t0 = run_clock::now();
      const double loss = gradient(w, i, t, model, g);
      slow_down(i, t, t0);
      return loss;
    };
    b.direction_from = [this](std::size_t, std::uint32_t i, std::span<const float> g, std::span<const float> model,
                              std::span<float> dir) { opt_.direction(g, model, velocity_[i - first_], dir); };  // no quasi-global (the rules)
    b.accuracy = [this](std::size_t w, std::span<const float> m, bool final) {
      const std::size_t total = fm_->test.count;
      const std::size_t samples = final ? (s_.final_eval_samples ? std::min(s_.final_eval_samples, total) : total)
                                        : std::min(s_.eval_samples, total);
      return fraction_correct(w, m, 0, samples);
    };
    b.share_accuracy = [this](std::size_t w, std::uint32_t node, std::size_t nodes, std::span<const float> m) {
      // node's share of the periodic slice: images [node S / n, (node + 1) S / n)
      const std::size_t samples = std::min<std::size_t>(s_.eval_samples, fm_->test.count);
      const std::size_t lo = node * samples / nodes, hi = (node + 1) * samples / nodes;
      if (hi <= lo)
        throw config_error("node " + std::to_string(node) + ": its share of " + std::to_string(samples) +
                           " evaluation images among " + std::to_string(nodes) + " nodes is empty");
      return fraction_correct(w, m, lo, hi);
    };
    b.save = [this](checkpoint_writer& w) {
      for (std::size_t li = 0; li < local_; ++li) {
        shards_[first_ + li].save(w);
        w.values(velocity_[li]);
        if (quasi_global_) {
          w.values(previous_[li]);
          w.f64(previous_lr_[li]);
        }
      }
    };
    b.restore = [this](checkpoint_reader& r) -> std::function<void()> { return restore(r); };
    b.training_ended = [this] {  // SCSP's final rounds take no local step: free the momentum
      for (auto* bufs : {&velocity_, &dirs_, &previous_})
        for (auto& v : *bufs) std::vector<float>().swap(v);
    };
    return b;
  }

 private:
  struct scratch {
    std::vector<float> grad, images;
    std::vector<std::uint8_t> labels;
    std::vector<std::uint32_t> batch;
    nn::workspace ws;
  };

  /// The fraction of test images [lo, hi) that `m` classifies correctly (worker w's scratch).
  double fraction_correct(std::size_t w, std::span<const float> m, std::size_t lo, std::size_t hi) {
    return static_cast<double>(net_->count_correct(m, fm_->test.pixels.data() + lo * in_, fm_->test.labels.data() + lo,
                                                   hi - lo, eval_ws_.at(w))) /
           static_cast<double>(hi - lo);
  }

  double step(std::size_t w, std::uint32_t i, std::uint32_t t, std::span<const float> model, std::span<float> dir) {
    const auto t0 = run_clock::now();
    scratch& sc = work_.at(w);  // this worker's buffers, sized at first use
    sc.grad.resize(d_);
    const double loss = gradient(w, i, t, model, sc.grad);
    if (quasi_global_) {  // the change since node i's previous step, divided by that step's rate
      opt_.quasi_global(sc.grad, model, velocity_[i - first_], previous_[i - first_], previous_lr_[i - first_], dir);
      previous_lr_[i - first_] = reference_lr_at(lr_, s_, train_rounds_, t);  // the trainer's rate of step t
    } else {
      opt_.direction(sc.grad, model, velocity_[i - first_], dir);
    }
    slow_down(i, t, t0);
    return loss;
  }

  /// Node i's minibatch gradient of local step t at model into grad; returns the loss.
  double gradient(std::size_t w, std::uint32_t i, std::uint32_t t, std::span<const float> model, std::span<float> grad) {
    const std::size_t batch = s_.batch;
    scratch& sc = work_.at(w);
    sc.images.resize(batch * in_), sc.labels.resize(batch);
    shards_[i].next_batch(batch, sc.batch);
    for (std::size_t b = 0; b < batch; ++b) {
      std::copy_n(fm_->train.pixels.data() + std::size_t{sc.batch[b]} * in_, in_, sc.images.data() + b * in_);
      sc.labels[b] = fm_->train.labels[sc.batch[b]];
    }
    return net_->loss_and_grad(model, sc.images.data(), sc.labels.data(), batch, grad, sc.ws,
                               nn::quantization{bits_, s_.seed, i, t});  // bits 0: full precision
  }

  /// A straggler (and --jitter): node i's step of local step t, begun at t0, takes factor x its
  /// compute time, on the calling thread.
  void slow_down(std::uint32_t i, std::uint32_t t, run_clock::time_point t0) const {
    const double factor = slowdown_[i] * (s_.jitter > 1 ? 1 + (s_.jitter - 1) * jitter_draw(s_.seed, i, t) : 1.0);
    if (factor > 1) {
      const std::chrono::duration<double> took = run_clock::now() - t0;  // simulated under SMPI
      detail::pause_for(std::chrono::duration_cast<std::chrono::nanoseconds>(took * (factor - 1)));
    }
  }

  std::function<void()> restore(checkpoint_reader& r) {
    std::vector<shard_sampler> sh;
    std::vector<std::vector<float>> vel(local_), prev(previous_.size());
    std::vector<double> prev_lr(previous_.size(), 0.0);
    const bool ended = resume_round_ >= train_rounds_;  // the buffers are empty once training has ended
    for (std::size_t li = 0; li < local_; ++li) {
      sh.push_back(shards_[first_ + li].read(r));
      vel[li] = r.values<float>("momentum", d_);
      if (vel[li].size() != d_ && !(vel[li].empty() && ended))
        r.fail("holds a momentum of " + std::to_string(vel[li].size()) + " elements for a model of " + std::to_string(d_));
      if (!quasi_global_) continue;
      prev[li] = r.values<float>("quasi-global momentum's previous model", d_);  // empty before the first step
      prev_lr[li] = r.f64("quasi-global momentum's previous rate");
      if (!prev[li].empty() && (prev[li].size() != d_ || !(prev_lr[li] > 0 && std::isfinite(prev_lr[li]))))
        r.fail("holds a quasi-global momentum's previous model of " + std::to_string(prev[li].size()) +
               " elements at rate " + std::to_string(prev_lr[li]) + " for a model of " + std::to_string(d_));
    }
    return [this, sh = std::move(sh), vel = std::move(vel), prev = std::move(prev), prev_lr]() mutable {
      for (std::size_t li = 0; li < local_; ++li) {
        shards_[first_ + li] = std::move(sh[li]);
        velocity_[li] = std::move(vel[li]);
        if (quasi_global_) previous_[li] = std::move(prev[li]), previous_lr_[li] = prev_lr[li];
      }
    };
  }

  run_spec s_;
  const fashion_mnist* fm_;
  const nn::model* net_;
  std::uint32_t first_;
  std::size_t local_, d_, in_;
  std::uint32_t train_rounds_, resume_round_ = 0;
  unsigned bits_;
  nn::sgd opt_;
  bool quasi_global_;   ///< --momentum-kind quasi-global
  nn::lr_schedule lr_;  ///< the run's learning rates (quasi-global momentum divides a change by its step's)
  std::vector<shard_sampler> shards_;
  std::vector<std::vector<float>> velocity_;  ///< the momentum buffers (the directions themselves: heavy ball)
  std::vector<std::vector<float>> dirs_;      ///< the directions, where they are not the buffer (Nesterov, quasi-global)
  std::vector<std::vector<float>> previous_;  ///< quasi-global: each node's model at its previous step
  std::vector<double> previous_lr_;           ///< quasi-global: the rate of that step
  std::vector<scratch> work_;
  std::vector<nn::workspace> eval_ws_;
  std::vector<double> slowdown_;
};

}  // namespace v0
}  // namespace sparsepush
