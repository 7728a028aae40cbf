// sparsepush/train/prepare_run.hpp: what a run of a validated run_spec needs before it trains,
// made in one place for every front end (sparsepush-train, Python's train(), a user's program):
// the checks of its files, the Fashion-MNIST data of --data, the model of --model sized to that
// data, and the plan (each node's shard, the round counts, SCSP's final rounds).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "../data/idx.hpp"
#include "../nn/model.hpp"
#include "reference_backend.hpp"
#include "run_spec.hpp"

namespace sparsepush {
inline namespace v0 {

/// A run's inputs: its data, its model and its plan.
struct prepared_run {
  std::shared_ptr<const fashion_mnist> data;  ///< the data set of --data (shared: SMPI's ranks read one copy)
  nn::model model;                            ///< the model of --model for the data's images and ten classes
  reference_plan plan;                        ///< the shards and round counts
};

/// How prepare_run gets the data set of a directory (--data). Empty: load_fashion_mnist into a
/// copy of this process's own.
using fashion_mnist_loader = std::function<std::shared_ptr<const fashion_mnist>(const std::string& dir)>;

/// The model of a spec for images of `rows` x `cols` (one channel) and Fashion-MNIST's ten classes.
inline nn::model reference_model(const run_spec& s, std::size_t rows, std::size_t cols) {
  return nn::model::make(s.model, 1, rows, cols, 10);
}

/// The inputs of a validated spec (validate() passed) on `rank`: the files it touches checked
/// (check_files, on rank 0), the data loaded (by `load`, or a copy of this process's own), the
/// model made and the run planned, in this order. The library's errors (config_error naming the
/// option, data_error naming the file) and std::bad_alloc pass through.
inline prepared_run prepare_run(const run_spec& s, int rank = 0, const fashion_mnist_loader& load = {}) {
  s.check_files(rank, fashion_mnist_files());
  std::shared_ptr<const fashion_mnist> data =
      load ? load(s.data) : std::make_shared<const fashion_mnist>(load_fashion_mnist(s.data));
  nn::model model = reference_model(s, data->train.rows, data->train.cols);
  reference_plan plan = plan_reference_run(s, data->train);
  return prepared_run{std::move(data), std::move(model), std::move(plan)};
}

}  // namespace v0
}  // namespace sparsepush
