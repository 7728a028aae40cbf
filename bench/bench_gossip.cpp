// Microbenchmarks of the gossip phase: the fused mixing kernel combine() (sparse top-k messages
// scattered, dense fp32 messages fused block-wise) and one whole Sparse-Push round of a
// push_sum_group, each beside one dense scale pass x[i] *= c over d floats (read + write of the
// destination, the least any mixing step into x costs). bench/ratios.py prints the ratios; the
// round is compared with nodes x DenseScale. BENCHMARK_MAIN lives in bench_compress.cpp.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <span>
#include <tuple>
#include <utility>
#include <vector>

#include <sparsepush/sparsepush.hpp>

namespace {

namespace sp = sparsepush;

/// A deterministic Gaussian vector of d floats per (d, seed), built once (never inside a timed loop).
const std::vector<float>& gaussian(std::size_t d, std::uint32_t seed) {
  static std::map<std::pair<std::size_t, std::uint32_t>, std::vector<float>> cache;
  auto it = cache.find({d, seed});
  if (it == cache.end()) {
    std::mt19937 gen(1000u + seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(d);
    for (float& x : v) x = normal(gen);
    it = cache.emplace(std::pair{d, seed}, std::move(v)).first;
  }
  return it->second;
}

std::size_t arg(const benchmark::State& state, int i) { return static_cast<std::size_t>(state.range(i)); }

void set_bytes(benchmark::State& state, std::size_t floats) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(floats * sizeof(float)));
}

const sp::context bench_ctx{42, 0, 0};

/// Message j of the combine benchmark at (d, k per mille): top-k of Gaussian vector j, or the
/// identity (dense fp32) message when k_permille == 1000. Built once per key.
const sp::message& combine_message(std::size_t d, std::size_t k_permille, std::uint32_t j) {
  static std::map<std::tuple<std::size_t, std::size_t, std::uint32_t>, sp::message> cache;
  auto it = cache.find({d, k_permille, j});
  if (it == cache.end()) {
    const std::span<const float> v = gaussian(d, j);
    sp::message m;
    if (k_permille >= 1000)
      sp::compress(sp::identity{}, v, m, bench_ctx);
    else
      sp::compress(sp::top_k{sp::k_spec::count(d * k_permille / 1000), sp::value_codec{}, sp::index_encoding::automatic},
                   v, m, bench_ctx);
    it = cache.emplace(std::tuple{d, k_permille, j}, std::move(m)).first;
  }
  return it->second;
}

// --- combine ---------------------------------------------------------------------------------

/// x += sum_j coef_j q_j over `messages` messages (args: d, k per mille, messages).
void BM_PushSumCombine(benchmark::State& state) {
  const std::size_t d = arg(state, 0), pm = arg(state, 1), n = arg(state, 2);
  std::vector<sp::weighted_message> in;
  std::size_t wire = 0;
  for (std::uint32_t j = 0; j < n; ++j) {
    const sp::message& m = combine_message(d, pm, j);
    in.push_back({&m, j % 2 == 0 ? 0.5 : -0.25});
    wire += m.wire_bytes();
  }
  std::vector<float> x(gaussian(d, 99));
  for (auto _ : state) {
    sp::combine<float>(std::span<float>(x), std::span<const sp::weighted_message>(in));
    benchmark::DoNotOptimize(x.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, d);
  state.counters["wire_bytes"] = static_cast<double>(wire);
}

/// The baseline: one dense pass x[i] *= c (c alternates 2 and 1/2, so x never drifts).
void BM_DenseScale(benchmark::State& state) {
  const std::size_t d = arg(state, 0);
  std::vector<float> x(gaussian(d, 99));
  float* p = x.data();
  std::size_t it = 0;
  for (auto _ : state) {
    float c = (it++ & 1) ? 0.5f : 2.0f;
    benchmark::DoNotOptimize(c);  // c escapes here; scale by a copy that does not, so the loop
    const float s = c;            // need not reload it after every store through p (and vectorizes)
    for (std::size_t i = 0; i < d; ++i) p[i] *= s;
    benchmark::DoNotOptimize(p);
    benchmark::ClobberMemory();
  }
  set_bytes(state, d);
}

// --- one Sparse-Push round -------------------------------------------------------------------

/// One push_sum_group round (error feedback, top-k 1%, one-peer exponential graph, in-process
/// transport, one thread) per iteration (args: d, nodes). Bytes: nodes x d floats. Gossip with
/// error feedback at eta = 1 and no consensus step is not stable: the models grow until, after
/// about 1000 rounds at d = 20586, x + e overflows. So the group starts again from its first
/// models every `restart` rounds, outside the timing.
void BM_SparsePushGossipRound(benchmark::State& state) {
  const std::size_t d = arg(state, 0), n = arg(state, 1);
  constexpr std::uint32_t restart = 256;
  std::vector<std::vector<float>> x0;
  for (std::uint32_t i = 0; i < n; ++i) x0.push_back(gaussian(d, 100 + i));
  std::optional<sp::push_sum_group<std::vector<float>>> group;
  group.emplace(x0);
  const auto sched = sp::one_peer_exponential(n);
  const sp::top_k comp{sp::k_spec::count(d / 100), sp::value_codec{}, sp::index_encoding::automatic};
  sp::loopback_network net(n, sp::for_lockstep({}));  // a lockstep group: messages by reference
  std::uint32_t t = 0;
  for (auto _ : state) {
    if (t > 0 && t % restart == 0) {
      state.PauseTiming();
      group.emplace(x0);
      state.ResumeTiming();
    }
    group->round(sched, comp, net, t++);
    benchmark::ClobberMemory();
  }
  set_bytes(state, n * d);
  if (t > 0) state.counters["wire_bytes"] = static_cast<double>(net.total_bytes()) / t;  // per round
}

/// One full Sparse-Push round (local step with a no-op gradient, top-1% with error feedback,
/// push, mix) at every node: the pure communication overhead of the algorithm over training.
void BM_SparsePushRound(benchmark::State& state) {
  const std::size_t d = arg(state, 0), n = arg(state, 1);
  std::vector<std::vector<float>> x0;
  for (std::uint32_t i = 0; i < n; ++i) x0.push_back(gaussian(d, 100 + i));
  sp::sparse_push<float> alg(std::move(x0), sp::parse_schedule("exponential", n),
                             sp::sparse_push_phases(sp::top_k{sp::k_spec::fraction(0.01)}, 0.02));
  const sp::gradient_oracle<float> no_op = [](std::uint32_t, std::uint32_t, std::span<const float>,
                                              std::span<float>) {};
  std::uint32_t t = 0;
  for (auto _ : state) {
    alg.round(t++, no_op, 0.1);
    benchmark::ClobberMemory();
  }
  set_bytes(state, n * d);
  if (t > 0) state.counters["wire_bytes"] = static_cast<double>(alg.bytes_sent()) / t;  // per round
}

/// One CHOCO-Push round at every node, set up as BM_SparsePushRound (no-op gradient, top-1%,
/// one-peer exponential graph, one thread): q = C(x' - h) per out-link, both ends' references
/// updated, the mix over the links' references. Its ratio to BM_SparsePushRound at the same
/// (d, nodes) is the cost of agreeing over SP's round.
void BM_ChocoPushRound(benchmark::State& state) {
  const std::size_t d = arg(state, 0), n = arg(state, 1);
  std::vector<std::vector<float>> x0;
  for (std::uint32_t i = 0; i < n; ++i) x0.push_back(gaussian(d, 100 + i));
  sp::choco_push<float> alg(std::move(x0), sp::parse_schedule("exponential", n),
                            {.consensus_step = 0.05, .compressor = sp::top_k{sp::k_spec::fraction(0.01)}});
  const sp::gradient_oracle<float> no_op = [](std::uint32_t, std::uint32_t, std::span<const float>,
                                              std::span<float>) {};
  std::uint32_t t = 0;
  for (auto _ : state) {
    alg.round(t++, no_op, 0.1);
    benchmark::ClobberMemory();
  }
  set_bytes(state, n * d);
  if (t > 0) state.counters["wire_bytes"] = static_cast<double>(alg.bytes_sent()) / t;  // per round
}

/// The memory streams a fused round with the strong guarantee cannot avoid, with no selection,
/// no message and no mixing (args: d, nodes, passes): per node, passes = 2 reads x, p and e once
/// (the plan: nothing is written before every node's check) and then reads them again writing x
/// and e (the apply); passes = 1 is the apply alone, the floor without the guarantee. With 16
/// nodes of 1e6 floats the 192 MB of state does not fit the last-level cache, while DenseScale's
/// 4 MB does: RoundStreams / (nodes x DenseScale) is the bytes-moved bound of the round's ratio.
void BM_RoundStreams(benchmark::State& state) {
  const std::size_t d = arg(state, 0), n = arg(state, 1), passes = arg(state, 2);
  std::vector<std::vector<float>> x, p, e;
  for (std::uint32_t i = 0; i < n; ++i) {
    x.push_back(gaussian(d, 100 + i));
    p.push_back(gaussian(d, 200 + i));
    e.push_back(std::vector<float>(d, 0.0f));
  }
  std::size_t it = 0;
  for (auto _ : state) {
    float g = (it++ & 1) ? -0.125f : 0.125f;  // x moves by -g p and back: it never drifts far
    benchmark::DoNotOptimize(g);
    const float gamma = g;
    for (std::size_t j = 0; j < n; ++j) {
      float* xs = x[j].data();
      const float* ps = p[j].data();
      float* es = e[j].data();
      if (passes > 1) {  // the plan's read: lane sums of v = (x - gamma p) + e
        constexpr std::size_t lanes = 16;
        float acc[lanes] = {};
        for (std::size_t i = 0; i + lanes <= d; i += lanes)
          for (std::size_t l = 0; l < lanes; ++l) acc[l] += (xs[i + l] - gamma * ps[i + l]) + es[i + l];
        benchmark::DoNotOptimize(acc);
      }
      for (std::size_t i = 0; i < d; ++i) {  // the apply: x = x - gamma p, e = (v + e) / 2 stays bounded
        const float xn = xs[i] - gamma * ps[i];
        es[i] = 0.5f * (xn + es[i]);
        xs[i] = xn;
      }
      benchmark::DoNotOptimize(xs);
      benchmark::ClobberMemory();
    }
  }
  set_bytes(state, n * d);
}

// --- arguments: d in {1e5, 1e6, 1e7}, k in {0.1%, 1%, 10%} of d (per mille), 1 or 4 messages --

constexpr std::int64_t sizes[] = {100'000, 1'000'000, 10'000'000};
constexpr std::int64_t k_per_mille[] = {1, 10, 100, 1000};  // 1000: dense (identity, fp32)
constexpr std::int64_t message_counts[] = {1, 4};

void d_args(benchmark::internal::Benchmark* b) {
  for (const std::int64_t d : sizes) b->Args({d});
}

void combine_args(benchmark::internal::Benchmark* b) {
  for (const std::int64_t d : sizes)
    for (const std::int64_t pm : k_per_mille)
      for (const std::int64_t m : message_counts) b->Args({d, pm, m});
}

void round_args(benchmark::internal::Benchmark* b) {
  for (const std::int64_t d : {100'000, 1'000'000})
    for (const std::int64_t nodes : {8, 16}) b->Args({d, nodes});
  b->Args({20'586, 16});  // the reference cnn's size: SP overhead beside BM_TrainStep_cnn/32
}

}  // namespace

BENCHMARK(BM_PushSumCombine)->Apply(combine_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_DenseScale)->Apply(d_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SparsePushGossipRound)->Apply(round_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_SparsePushRound)->Apply(round_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ChocoPushRound)->Apply(round_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RoundStreams)->Args({1'000'000, 16, 2})->Args({1'000'000, 16, 1})->Unit(benchmark::kMicrosecond);
