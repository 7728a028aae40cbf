// Microbenchmarks of the training backend (nn/): one local step of one node, forward + backward +
// sgd direction on random data, as BM_TrainStep_<model>/<batch>; items are images, so the report
// shows images/s. The model's FLOPs per step are attached as a counter, and the instruction set
// the products run on as a label. Evaluation: BM_Inference_<model>/<batch> (model::logits, the
// inference path) beside its baseline BM_TrainForward_<model>/<batch> (model::loss, the training
// forward pass that keeps every activation). bench/peers/torch_cnn.py times the same cnn in
// PyTorch; bench/ratios.py puts the two side by side. BENCHMARK_MAIN lives in bench_compress.cpp.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <sparsepush/nn/gemm.hpp>
#include <sparsepush/nn/model.hpp>
#include <sparsepush/nn/optimizer.hpp>

namespace {

namespace nn = sparsepush::nn;

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
  state.counters["GFLOP"] = benchmark::Counter(m.profile(batch).flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
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

void BM_TrainStep_mlp(benchmark::State& state) { train_step(state, "mlp"); }
void BM_TrainStep_cnn(benchmark::State& state) { train_step(state, "cnn"); }
void BM_TrainStep_cnn_evonorm(benchmark::State& state) { train_step(state, "cnn_evonorm"); }
void BM_Inference_cnn(benchmark::State& state) { forward(state, "cnn", true); }
void BM_TrainForward_cnn(benchmark::State& state) { forward(state, "cnn", false); }

}  // namespace

BENCHMARK(BM_TrainStep_mlp)->Arg(32)->Arg(128)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStep_cnn)->Arg(32)->Arg(128)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStep_cnn_evonorm)->Arg(32)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Inference_cnn)->Arg(2000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainForward_cnn)->Arg(256)->Unit(benchmark::kMillisecond);
