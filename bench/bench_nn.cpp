// Microbenchmarks of the training backend (nn/): one local step of one node, forward + backward +
// sgd direction on random data, as BM_TrainStep_<model>/<batch>; items are images, so the report
// shows images/s. The model's FLOPs per step (model::profile, from the layer shapes) give two
// counters: GFLOP (per second) and peak, the fraction of one core's fp32 FMA peak; the instruction
// set the products run on is the label. BM_FmaPeak measures that peak: independent chains of
// fused multiply-adds, enough of them to keep every FMA pipe busy. Evaluation:
// BM_Inference_<model>/<batch> (model::logits, the inference path) beside its baseline
// BM_TrainForward_<model>/<batch> (model::loss, the training forward pass that keeps every
// activation). bench/peers/torch_cnn.py times the same cnn in PyTorch; bench/ratios.py puts the
// two side by side. BM_GemmCnn/<i> times the cnn's five products one sample at a time, each at
// the shape its layer calls, with the same counters. BENCHMARK_MAIN lives in bench_compress.cpp.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <ctime>
#include <span>
#include <string>
#include <vector>

#include <sparsepush/nn/gemm.hpp>
#include <sparsepush/nn/model.hpp>
#include <sparsepush/nn/optimizer.hpp>

namespace {

namespace nn = sparsepush::nn;

// --- one core's fp32 FMA peak -------------------------------------------------------------------
// kChains independent accumulators, acc = fma(m, c, acc) with gemm.hpp's multiply-add of the level:
// a chain waits for its previous FMA (4 cycles on Zen 4 and recent Intel), so with two FMA pipes
// at least 8 must be in flight; 16 leave slack and fit the 16 (AVX2) or 32 (AVX-512) registers.
constexpr int kChains = 16;

template <class Isa>
[[gnu::always_inline]] inline float fma_chains(std::int64_t n) {
  typedef typename Isa::vec vec;
  const vec m = vec{} + 1e-7f, c = vec{} + 1e-7f;
  vec acc[kChains];
  for (int j = 0; j < kChains; ++j) acc[j] = vec{} + (1.0f + 0.001f * float(j));
  for (std::int64_t i = 0; i < n; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kChains; ++j) Isa::fmadd(acc[j], m, c);
  }
  float sum = 0;
  for (int j = 0; j < kChains; ++j)
    for (std::size_t l = 0; l < sizeof(vec) / sizeof(float); ++l) sum += acc[j][l];
  return sum;
}

#ifdef SPARSEPUSH_NN_X86_DISPATCH
[[gnu::target("avx512f,avx2,fma"), gnu::flatten]] float fma_chains_avx512(std::int64_t n) {
  return fma_chains<nn::detail::fma_avx512>(n);
}
[[gnu::target("avx2,fma"), gnu::flatten]] float fma_chains_avx2(std::int64_t n) {
  return fma_chains<nn::detail::fma_avx2>(n);
}
[[gnu::target("fma"), gnu::flatten]] float fma_chains_sse(std::int64_t n) {
  return fma_chains<nn::detail::fma_baseline<float, 16>>(n);
}
#endif

/// Lanes of one multiply-add at the level gemm() runs.
std::size_t fma_lanes(nn::detail::simd_level level) {
  return level == nn::detail::simd_level::avx512 ? 16 : level == nn::detail::simd_level::avx2 ? 8 : 4;
}
/// n rounds of the chains at `level`: 2 n kChains lanes FLOPs (a multiply-add is 2).
float fma_step(std::int64_t n, nn::detail::simd_level level) {
#ifdef SPARSEPUSH_NN_X86_DISPATCH
  if (level == nn::detail::simd_level::avx512) return fma_chains_avx512(n);
  if (level == nn::detail::simd_level::avx2) return fma_chains_avx2(n);
  if (nn::detail::fma_supported()) return fma_chains_sse(n);
#endif
  return fma_chains<nn::detail::fma_baseline<float, 16>>(n);
}
double fma_flops(std::int64_t n, nn::detail::simd_level level) {
  return 2.0 * double(n) * kChains * double(fma_lanes(level));
}

double thread_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

/// One core's fp32 FMA peak in FLOP/s at the level gemm() runs: the best of 7 runs of about 20 ms
/// of this thread's CPU time, measured once (the train steps' "peak" counter divides by it).
double fma_peak() {
  static const double peak = [] {
    const auto level = nn::detail::simd_supported();
    const std::int64_t n = 1 << 20;
    double best = 0;
    for (int r = 0; r < 7; ++r) {
      const double t0 = thread_seconds();
      benchmark::DoNotOptimize(fma_step(n, level));
      best = std::max(best, fma_flops(n, level) / (thread_seconds() - t0));
    }
    return best;
  }();
  return peak;
}

void BM_FmaPeak(benchmark::State& state) {
  const auto level = nn::detail::simd_supported();
  const std::int64_t n = 1 << 16;
  for (auto _ : state) benchmark::DoNotOptimize(fma_step(n, level));
  state.counters["GFLOP"] = benchmark::Counter(fma_flops(n, level) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(nn::detail::simd_name(level));
}

void train_step(benchmark::State& state, const std::string& name) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  const auto m = nn::model::make(name);
  std::vector<float> params(m.num_params()), grad(params.size()), velocity(params.size(), 0.f),
      direction(params.size());
  m.init(params, 1);
  nn::normal_rng rng(2);
  std::vector<float> images(batch * m.input_size());
  for (float& x : images) x = static_cast<float>(rng.normal());
  std::vector<std::uint8_t> labels(batch);
  for (std::size_t b = 0; b < batch; ++b) labels[b] = static_cast<std::uint8_t>(b % m.num_classes());
  nn::workspace ws;
  const nn::sgd opt{0.9, true, 1e-4};
  for (auto _ : state) {
    const float loss = m.loss_and_grad(params, images.data(), labels.data(), batch, grad, ws);
    opt.direction(grad, params, velocity, direction);
    benchmark::DoNotOptimize(loss);
    benchmark::DoNotOptimize(direction.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(batch));
  // rates per second of CPU time: GFLOP/s, and that over the peak (a fraction)
  const double flops = m.profile(batch).flops;
  state.counters["GFLOP"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak"] = benchmark::Counter(flops / fma_peak(), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(nn::detail::simd_name(nn::detail::simd_supported()));
}

/// Forward passes over `batch` random images: the inference path or the training pass.
void forward(benchmark::State& state, const std::string& name, bool inference) {
  const auto batch = static_cast<std::size_t>(state.range(0));
  const auto m = nn::model::make(name);
  std::vector<float> params(m.num_params());
  m.init(params, 1);
  nn::normal_rng rng(2);
  std::vector<float> images(batch * m.input_size()), logits(batch * m.num_classes());
  for (float& x : images) x = static_cast<float>(rng.normal());
  std::vector<std::uint8_t> labels(batch);
  for (std::size_t b = 0; b < batch; ++b) labels[b] = static_cast<std::uint8_t>(b % m.num_classes());
  nn::workspace ws;
  for (auto _ : state) {
    if (inference) {
      m.logits(params, images.data(), batch, logits.data(), ws);
      benchmark::DoNotOptimize(logits.data());
    } else {
      benchmark::DoNotOptimize(m.loss(params, images.data(), labels.data(), batch, ws));
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * static_cast<std::int64_t>(batch));
  state.SetLabel(nn::detail::simd_name(nn::detail::simd_supported()));
}

// --- the cnn's products, one sample each, as its layers call gemm() ----------------------------
// conv1: 1 -> 16 channels, 3x3, pad 1, 28x28 (R = 9 < 16 outputs: im2col columns, P = 784);
// conv2: 16 -> 32 channels, 3x3, pad 1, 14x14 (R = 144: shifted windows of the zero-padded 16x16
// planes, 14 rows of 16 columns computed for 14 of 14 outputs each). Counters: GFLOP (per second)
// counts every product the call computes, peak is that over fma_peak(), useful the fraction of
// those products that land in an output (the windows' extra columns do not).
struct gemm_shape {
  const char* name;
  std::size_t m, n, k, a_row, ldb, ldc;
  int windows;  // 0: B is a matrix (ldb); 1: B's rows are windows of 16 padded 16x16 planes
                // (conv2 forward); 2: of 32 (conv2's input gradient, the full convolution)
  nn::detail::gemm_init init;
  double useful;
};

constexpr gemm_shape cnn_gemms[] = {
    {"conv1 forward (W cols)", 16, 784, 9, 9, 784, 784, 0, nn::detail::gemm_init::row_bias, 1.0},
    {"conv1 weight gradient (cols dY^T)", 9, 16, 784, 784, 16, 16, 0, nn::detail::gemm_init::accumulate, 1.0},
    {"conv2 forward (W windows)", 32, 224, 144, 144, 0, 224, 1, nn::detail::gemm_init::row_bias, 196.0 / 224.0},
    {"conv2 weight gradient (cols dY^T)", 144, 32, 196, 208, 32, 32, 0, nn::detail::gemm_init::accumulate, 1.0},
    {"conv2 input gradient (Wf windows of dY)", 16, 224, 288, 288, 0, 224, 2, nn::detail::gemm_init::zero,
     196.0 / 224.0},
};

void BM_GemmCnn(benchmark::State& state) {
  const gemm_shape& s = cnn_gemms[state.range(0)];
  nn::normal_rng rng(3);
  std::vector<float> a(s.m * s.a_row + 64), b(std::max<std::size_t>(s.k * s.ldb, 32 * 256) + 256), c(s.m * s.ldc + 64),
      bias(s.m);
  for (float& v : a) v = static_cast<float>(rng.normal());
  for (float& v : b) v = static_cast<float>(rng.normal());
  std::vector<const float*> rows(s.k);
  nn::detail::gemm_args<float> g;
  g.a = a.data(), g.a_row = s.a_row, g.a_col = 1;
  g.b_padded = true;
  g.c = c.data(), g.ldc = s.ldc;
  g.m = s.m, g.n = s.n, g.k = s.k;
  g.init = s.init, g.bias = bias.data();
  if (s.windows) {  // row (ch, i, j) = plane ch at row i, column j, as conv2d's windows
    for (std::size_t r = 0; r < s.k; ++r) rows[r] = b.data() + (r / 9) * 256 + (r % 9 / 3) * 16 + r % 3;
    g.b_rows = rows.data();
  } else {
    g.b = b.data(), g.ldb = s.ldb;
  }
  for (auto _ : state) {
    nn::detail::gemm(g);
    benchmark::DoNotOptimize(c.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * double(s.m) * double(s.n) * double(s.k);
  state.counters["GFLOP"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak"] = benchmark::Counter(flops / fma_peak(), benchmark::Counter::kIsIterationInvariantRate);
  state.counters["useful"] = s.useful;
  state.SetLabel(std::string(s.name) + ", " + nn::detail::simd_name(nn::detail::simd_supported()));
}

void BM_TrainStep_mlp(benchmark::State& state) { train_step(state, "mlp"); }
void BM_TrainStep_cnn(benchmark::State& state) { train_step(state, "cnn"); }
void BM_TrainStep_cnn_evonorm(benchmark::State& state) { train_step(state, "cnn_evonorm"); }
void BM_Inference_cnn(benchmark::State& state) { forward(state, "cnn", true); }
void BM_TrainForward_cnn(benchmark::State& state) { forward(state, "cnn", false); }

}  // namespace

BENCHMARK(BM_FmaPeak);
BENCHMARK(BM_TrainStep_mlp)->Arg(32)->Arg(128)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStep_cnn)->Arg(32)->Arg(128)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStep_cnn_evonorm)->Arg(32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Inference_cnn)->Arg(2000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainForward_cnn)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GemmCnn)->DenseRange(0, 4)->Unit(benchmark::kMicrosecond);
