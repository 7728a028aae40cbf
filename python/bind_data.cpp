// python/bind_data.cpp: the data side of a run as sparsepush-train deals it: the partition of the
// labels over the nodes (partition), each node's seeded minibatch order (ShardSampler, shard_seed)
// and, where the module has the reference backend (Eigen and zlib: SPARSEPUSH_PYTHON_TRAIN), a
// model's initial parameters (init_model) and the Fashion-MNIST files (load_fashion_mnist).
#include <optional>
#include <string>
#include <vector>

#ifdef SPARSEPUSH_PYTHON_TRAIN
#include <sparsepush/data/idx.hpp>
#include <sparsepush/nn/model.hpp>
#include <sparsepush/train/reference_backend.hpp>
#endif

#include "bindings.hpp"

namespace sparsepush_python {
namespace {

py::list partition(py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast> labels, std::size_t n, double skew,
                   std::uint64_t seed, double dirichlet) {
  const std::span<const std::uint8_t> l(labels.data(), static_cast<std::size_t>(labels.size()));
  sp::partition p;
  {
    py::gil_scoped_release nogil;
    p = dirichlet > 0.0 ? sp::partition_dirichlet(l, n, dirichlet, seed) : sp::partition_skewed(l, n, skew, seed);
  }
  py::list out;
  for (auto& part : p) out.append(array_owning(std::move(part)));
  return out;
}

std::vector<std::uint32_t> samples_of(py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast> samples) {
  return {samples.data(), samples.data() + samples.size()};
}

py::array_t<std::uint32_t> next_batch(sp::shard_sampler& s, std::size_t batch) {
  std::vector<std::uint32_t> out;
  s.next_batch(batch, out);
  return array_owning(std::move(out));
}

#ifdef SPARSEPUSH_PYTHON_TRAIN
py::array_t<float> init_model(const std::string& name, std::uint64_t seed, std::size_t channels, std::size_t rows,
                              std::size_t cols, std::size_t classes) {
  const sp::nn::model net = sp::nn::model::make(name, channels, rows, cols, classes);
  std::vector<float> x(net.num_params());
  net.init(std::span<float>(x), seed);
  return array_owning(std::move(x));
}

py::dict images_dict(sp::labelled_images&& li) {
  py::dict d;
  const auto count = static_cast<py::ssize_t>(li.count);
  d["images"] = array_owning(std::move(li.pixels), {count, static_cast<py::ssize_t>(li.rows), static_cast<py::ssize_t>(li.cols)});
  d["labels"] = array_owning(std::move(li.labels));
  return d;
}

py::dict load_fashion_mnist(const std::string& dir) {
  std::optional<sp::fashion_mnist> fm;
  {
    py::gil_scoped_release nogil;
    fm.emplace(sp::load_fashion_mnist(dir));
  }
  py::dict d;
  d["train"] = images_dict(std::move(fm->train));
  d["test"] = images_dict(std::move(fm->test));
  return d;
}

/// load_fashion_mnist's docstring, its default directory the library's.
const char* load_doc() {
  static const std::string doc = "load_fashion_mnist(dir=\"" + std::string(sp::fashion_mnist_default_dir) + R"doc(") -> dict

Fashion-MNIST from the four .gz files of dir, as sparsepush-train reads it: {"train": {"images":
float32 array (count, rows, cols) scaled to [0, 1], "labels": uint8 array}, "test": {...}}.
Raises DataError naming a missing or malformed file.)doc";
  return doc.c_str();
}

/// shard_seed, init_model and load_fashion_mnist: the reference backend's.
void bind_reference_data(py::module_& m) {
  m.def("shard_seed", &sp::shard_seed, py::arg("seed"), py::arg("node"),
        "shard_seed(seed, node) -> int\n\nThe seed of node's ShardSampler in a run of seed `seed`.");
  m.def("init_model", &init_model, py::arg("name"), py::arg("seed"), py::arg("channels") = 1, py::arg("rows") = 28,
        py::arg("cols") = 28, py::arg("classes") = 10,
        R"doc(init_model(name, seed, channels=1, rows=28, cols=28, classes=10) -> numpy float32 array

The initial parameters sparsepush-train gives the model `name` ("mlp", "cnn", "cnn_evonorm",
"cnn_range_evonorm") at --seed seed, flat in the reference backend's layout (per layer: a
convolution's weights [out][in][k][k] then its bias, GroupNorm's gamma then beta, a dense layer's
weights [out][in] then its bias): He-normal weights, zero biases, unit scales.)doc");

  m.def("load_fashion_mnist", &load_fashion_mnist, py::arg("dir") = sp::run_spec::default_fashion_mnist_path,
        load_doc());
}
#endif

}  // namespace

void bind_data(py::module_& m) {
  m.def("partition", &partition,
      py::arg("labels"), py::arg("n"), py::arg("skew") = 0.0, py::arg("seed") = 0, py::arg("dirichlet") = 0.0,
      R"doc(partition(labels, n, skew=0.0, seed=0, dirichlet=0.0) -> list of numpy uint32 arrays

The sample indices of each of n nodes, exactly as sparsepush-train deals them: skewed labels
(skew in [0, 1]: 0 is IID, 1 fully sorted by label; Hsieh et al.) or, with dirichlet > 0, a
Dirichlet(alpha) label partition. labels: one uint8 class per sample.)doc");

  py::class_<sp::shard_sampler>(m, "ShardSampler",
                                "One node's samples and its minibatch order, as sparsepush-train draws them: reshuffled "
                                "(std::mt19937_64) at the start of every epoch; a batch may cross into the next epoch.")
      .def(py::init([](py::array_t<std::uint32_t, py::array::c_style | py::array::forcecast> samples, std::uint64_t seed) {
             return sp::shard_sampler(samples_of(samples), seed);
           }),
           py::arg("samples"), py::arg("seed"),
           "ShardSampler(samples, seed)\n\nThe sample indices of one node (partition()'s) and the seed of its order "
           "(shard_seed(run seed, node) in sparsepush-train).")
      .def("next_batch", &next_batch, py::arg("batch"),
           "next_batch(batch) -> numpy uint32 array\n\nThe next batch sample indices.")
      .def_readonly("epoch", &sp::shard_sampler::epoch, "Epochs begun (each begins with a shuffle).")
      .def_readonly("cursor", &sp::shard_sampler::cursor, "The position in this epoch's order.");
#ifdef SPARSEPUSH_PYTHON_TRAIN
  bind_reference_data(m);
#else
  for (const char* name : {"shard_seed", "init_model", "load_fashion_mnist"}) refuse_without_train(m, name);
#endif
}

}  // namespace sparsepush_python
