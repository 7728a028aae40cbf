// Microbenchmarks of the training backend (nn/): one local step of one node, forward + backward +
// sgd direction on random data, as BM_TrainStep_<model>/<batch>; items are images, so the report
// shows images/s. The model's FLOPs per step are attached as a counter. BENCHMARK_MAIN lives in
// bench_compress.cpp.
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

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
}

void BM_TrainStep_mlp(benchmark::State& state) { train_step(state, "mlp"); }
void BM_TrainStep_cnn(benchmark::State& state) { train_step(state, "cnn"); }
void BM_TrainStep_cnn_evonorm(benchmark::State& state) { train_step(state, "cnn_evonorm"); }

}  // namespace

BENCHMARK(BM_TrainStep_mlp)->Arg(32)->Arg(128)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStep_cnn)->Arg(32)->Arg(128)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TrainStep_cnn_evonorm)->Arg(32)->Unit(benchmark::kMillisecond);
