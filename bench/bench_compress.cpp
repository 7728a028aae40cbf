// Microbenchmarks of the compressors, error feedback and the wire codec, each beside a plain
// baseline at the same d (and k): std::nth_element / std::partial_sort top-k, one streaming read
// of d floats (the memory-bound floor) and the plain e = x + e pass. bench/ratios.py prints the
// ratios. Every benchmark reports bytes of the input read (d * sizeof(float)) per iteration.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <map>
#include <random>
#include <span>
#include <utility>
#include <vector>

#include <sparsepush/sparsepush.hpp>

namespace {

namespace sp = sparsepush;

/// A deterministic Gaussian vector of d floats, built once per size (never inside a timed loop).
const std::vector<float>& input(std::size_t d) {
  static std::map<std::size_t, std::vector<float>> cache;
  auto it = cache.find(d);
  if (it == cache.end()) {
    std::mt19937 gen(12345u);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> v(d);
    for (float& x : v) x = normal(gen);
    it = cache.emplace(d, std::move(v)).first;
  }
  return it->second;
}

std::size_t arg_d(const benchmark::State& state) { return static_cast<std::size_t>(state.range(0)); }
std::size_t arg_k(const benchmark::State& state) { return static_cast<std::size_t>(state.range(1)); }

void set_bytes(benchmark::State& state, std::size_t d) {
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) *
                          static_cast<std::int64_t>(d * sizeof(float)));
}

void set_wire_bytes(benchmark::State& state, const sp::message& m) {
  state.counters["wire_bytes"] = static_cast<double>(m.wire_bytes());
}

const sp::context bench_ctx{42, 0, 0};

sp::top_k make_top_k(std::size_t k) {
  return sp::top_k{sp::k_spec::count(k), sp::value_codec{}, sp::index_encoding::automatic};
}

// --- plain top-k baselines: same output as top_k (ascending indices, ties to the lower index) --

using keyed = std::pair<float, std::uint32_t>;  // (|v_i|, i)

bool larger_first(const keyed& a, const keyed& b) {
  return a.first > b.first || (a.first == b.first && a.second < b.second);
}

void fill_keyed(std::span<const float> v, std::vector<keyed>& buf) {
  buf.resize(v.size());
  for (std::size_t i = 0; i < v.size(); ++i) buf[i] = {std::abs(v[i]), static_cast<std::uint32_t>(i)};
}

void finish_indices(const std::vector<keyed>& buf, std::size_t k, std::vector<std::uint32_t>& out) {
  out.resize(k);
  for (std::size_t j = 0; j < k; ++j) out[j] = buf[j].second;
  std::sort(out.begin(), out.end());
}

void nth_element_top_k(std::span<const float> v, std::size_t k, std::vector<keyed>& buf,
                       std::vector<std::uint32_t>& out) {
  fill_keyed(v, buf);
  std::nth_element(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(k), buf.end(), larger_first);
  finish_indices(buf, k, out);
}

void partial_sort_top_k(std::span<const float> v, std::size_t k, std::vector<keyed>& buf,
                        std::vector<std::uint32_t>& out) {
  fill_keyed(v, buf);
  std::partial_sort(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(k), buf.end(), larger_first);
  finish_indices(buf, k, out);
}

/// Time compress_with(c, ...) on the cached input of size d (range 0), with one workspace reused
/// across iterations as a node reuses its own.
template <class C>
void run_compressor(benchmark::State& state, const C& c) {
  const std::span<const float> v = input(arg_d(state));
  sp::message m;
  sp::compress_workspace<float> ws;
  for (auto _ : state) {
    sp::compress_with<float>(c, v, m, bench_ctx, ws);
    benchmark::DoNotOptimize(m.payload.data());
  }
  set_bytes(state, v.size());
  set_wire_bytes(state, m);
  state.counters["workspace_bytes"] = static_cast<double>(ws.capacity_bytes());
}

// --- top-k and its baselines ----------------------------------------------------------------

void BM_TopK(benchmark::State& state) { run_compressor(state, make_top_k(arg_k(state))); }

/// sp::compress, which allocates a fresh workspace every time: what a caller that keeps no
/// workspace pays over BM_TopK.
void BM_TopKFreshWorkspace(benchmark::State& state) {
  const std::span<const float> v = input(arg_d(state));
  const auto c = make_top_k(arg_k(state));
  sp::message m;
  for (auto _ : state) {
    sp::compress(c, v, m, bench_ctx);
    benchmark::DoNotOptimize(m.payload.data());
  }
  set_bytes(state, v.size());
  set_wire_bytes(state, m);
}

void BM_TopKNthElement(benchmark::State& state) {
  const std::span<const float> v = input(arg_d(state));
  const std::size_t k = arg_k(state);
  std::vector<keyed> buf;
  std::vector<std::uint32_t> idx;
  // Untimed check that the baseline selects exactly what top_k selects.
  sp::message m;
  sp::compress(make_top_k(k), v, m, bench_ctx);
  nth_element_top_k(v, k, buf, idx);
  if (idx != m.indices) {
    state.SkipWithError("nth_element baseline disagrees with top_k");
    return;
  }
  for (auto _ : state) {
    nth_element_top_k(v, k, buf, idx);
    benchmark::DoNotOptimize(idx.data());
  }
  set_bytes(state, v.size());
}

void BM_TopKPartialSort(benchmark::State& state) {
  const std::span<const float> v = input(arg_d(state));
  const std::size_t k = arg_k(state);
  std::vector<keyed> buf;
  std::vector<std::uint32_t> idx;
  for (auto _ : state) {
    partial_sort_top_k(v, k, buf, idx);
    benchmark::DoNotOptimize(idx.data());
  }
  set_bytes(state, v.size());
}

/// Sum of v with independent accumulators, so that the add latency stays off the critical path
/// and the loop vectorizes without -ffast-math: one streaming read of v.
float lane_sum(std::span<const float> s) {
  constexpr std::size_t lanes = 16;
  const float* v = s.data();
  const std::size_t n = s.size();
  float acc[lanes] = {};
  std::size_t i = 0;
  for (; i + lanes <= n; i += lanes)
    for (std::size_t j = 0; j < lanes; ++j) acc[j] += v[i + j];
  for (; i < n; ++i) acc[0] += v[i];
  float sum = 0.0f;
  for (const float a : acc) sum += a;
  return sum;
}

/// One streaming read of d floats: the floor for any kernel that must look at every value.
void BM_ReadPass(benchmark::State& state) {
  const std::span<const float> v = input(arg_d(state));
  for (auto _ : state) {
    float sum = lane_sum(v);
    benchmark::DoNotOptimize(sum);
  }
  set_bytes(state, v.size());
}

// --- error feedback -------------------------------------------------------------------------

/// v = x + e; q = top_k(v); e = v - q, x fixed; the residual stays bounded across iterations.
void BM_ErrorFeedback(benchmark::State& state) {
  const std::span<const float> x = input(arg_d(state));
  const auto c = make_top_k(arg_k(state));
  std::vector<float> e(x.size(), 0.0f);
  sp::message m;
  sp::compress_workspace<float> ws;
  for (auto _ : state) {
    sp::compress_with_feedback<float>(c, x, std::span<float>(e), m, bench_ctx, ws);
    benchmark::DoNotOptimize(m.payload.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, x.size());
  set_wire_bytes(state, m);
}

/// One streaming read of two d-float vectors (x and e), all error feedback's selection reads: on
/// a core whose reads, not its writes, set the pace of a stream from memory, the scan's floor, and
/// the e = x + e pass costs about as much.
void BM_ReadPair(benchmark::State& state) {
  const std::span<const float> x = input(arg_d(state));
  std::vector<float> e(x.size(), 1.0f);
  for (auto _ : state) {
    float sum = lane_sum(x) + lane_sum(e);
    benchmark::DoNotOptimize(sum);
  }
  set_bytes(state, 2 * x.size());
}

/// The plain e = x + e pass over d: what fused error feedback adds at the least.
void BM_ErrorFeedbackPass(benchmark::State& state) {
  const std::span<const float> x = input(arg_d(state));
  std::vector<float> e(x.size(), 0.0f);
  for (auto _ : state) {
    for (std::size_t i = 0; i < x.size(); ++i) e[i] = x[i] + e[i];
    benchmark::DoNotOptimize(e.data());
    benchmark::ClobberMemory();
  }
  set_bytes(state, x.size());
}

// --- the other compressors ------------------------------------------------------------------

void BM_RandomK(benchmark::State& state) {
  run_compressor(state, sp::random_k{sp::k_spec::count(arg_k(state)), false});
}

void BM_QSGD(benchmark::State& state) { run_compressor(state, sp::qsgd{16}); }  // philox7, 16-bit draws
/// QSGD on 0.3.3's stream (Philox4x32-10, a 24-bit draw a coordinate): what the default gained.
void BM_QSGDPhilox10(benchmark::State& state) { run_compressor(state, sp::qsgd{16, sp::qsgd_stream::philox10}); }

void BM_Sign(benchmark::State& state) { run_compressor(state, sp::scaled_sign{}); }

void BM_Threshold(benchmark::State& state) {
  run_compressor(state, sp::threshold_k{sp::k_spec::count(arg_k(state))});
}

// --- wire codec of a top-k message ----------------------------------------------------------

sp::message top_k_message(std::size_t d, std::size_t k) {
  sp::message m;
  sp::compress(make_top_k(k), std::span<const float>(input(d)), m, bench_ctx);
  return m;
}

void BM_Encode(benchmark::State& state) {
  const sp::message m = top_k_message(arg_d(state), arg_k(state));
  std::vector<std::byte> buf;
  for (auto _ : state) {
    buf.clear();  // keeps capacity: measures encoding, not allocation
    sp::encode(m, buf);
    benchmark::DoNotOptimize(buf.data());
  }
  set_bytes(state, arg_d(state));
  set_wire_bytes(state, m);
}

void BM_Decode(benchmark::State& state) {
  const sp::message m = top_k_message(arg_d(state), arg_k(state));
  const std::vector<std::byte> buf = sp::encode(m);
  sp::message out;
  for (auto _ : state) {
    sp::decode(buf, out);
    benchmark::DoNotOptimize(out.payload.data());
  }
  set_bytes(state, arg_d(state));
  set_wire_bytes(state, out);
}

// --- arguments: d in {1e5, 1e6, 1e7}, k in {0.1%, 1%, 10%} of d (as an absolute count) -------
// The SIMD level of the kernels is the best the CPU has; SPARSEPUSH_SIMD=scalar|avx2 forces a lower
// one (sparsepush/detail/simd.hpp), e.g. to measure what the vector kernels gain.

constexpr std::int64_t sizes[] = {100'000, 1'000'000, 10'000'000};
constexpr std::int64_t k_per_mille[] = {1, 10, 100};

void d_args(benchmark::internal::Benchmark* b) {
  for (const std::int64_t d : sizes) b->Args({d});
}

void d_k_args(benchmark::internal::Benchmark* b) {
  for (const std::int64_t d : sizes)
    for (const std::int64_t pm : k_per_mille) b->Args({d, d * pm / 1000});
}

// d = 1e8 (400 MB of input, 800 MB with the residual) for the streaming kernels and their floors
// only: there the input is far beyond any cache. k in {0.1%, 1%}. The nth_element baselines are
// left out at this size (seconds per run).
constexpr std::int64_t big = 100'000'000;

void d_args_big(benchmark::internal::Benchmark* b) {
  d_args(b);
  b->Args({big});
}

void d_k_args_big(benchmark::internal::Benchmark* b) {
  d_k_args(b);
  for (const std::int64_t pm : {1, 10}) b->Args({big, big * pm / 1000});
}

}  // namespace

BENCHMARK(BM_TopK)->Apply(d_k_args_big)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopKFreshWorkspace)->Apply(d_k_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopKNthElement)->Apply(d_k_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TopKPartialSort)->Apply(d_k_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReadPass)->Apply(d_args_big)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReadPair)->Apply(d_args_big)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ErrorFeedback)->Apply(d_k_args_big)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ErrorFeedbackPass)->Apply(d_args_big)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_RandomK)->Apply(d_k_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QSGD)->Apply(d_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_QSGDPhilox10)->Apply(d_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Sign)->Apply(d_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Threshold)->Apply(d_k_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Encode)->Apply(d_k_args)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Decode)->Apply(d_k_args)->Unit(benchmark::kMicrosecond);

BENCHMARK_MAIN();
