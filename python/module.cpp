// python/module.cpp: the extension `sparsepush._core` (pybind11), which the package `sparsepush`
// (python/sparsepush/__init__.py) re-exports. One push-sum node, a group of nodes, the loopback
// and MPI networks, schedules, compressors and the wire format, over the caller's own
// float32/float64 CPU memory (python/buffers.hpp: zero copy); and a whole training run of
// sparsepush-train (train, RunSpec). Every call that computes or waits releases the GIL, so Python
// threads, one per node, run their rounds in parallel. The module does not link libtorch: torch
// tensors come in through DLPack. Each area is bound in its own python/bind_<area>.cpp.
#include <string>

#include "bindings.hpp"

using namespace sparsepush_python;

PYBIND11_MODULE(_core, m) {
  py::options options;
  options.disable_function_signatures();  // every docstring starts with its own signature
  m.doc() = R"doc(sparsepush: Sparse-Push and push-sum gossip over directed, time-varying graphs.

The nodes' models live in the caller's own memory: a C-contiguous float32/float64 numpy array or
torch CPU tensor given to PushSumNode (or PushSumGroup) is the node's x, updated in place by every
round. The module does not link libtorch (torch tensors come in through DLPack). Every call that
computes or waits releases the GIL. Errors are sparsepush.Error and its subclasses, named as the
C++ exceptions (ConfigError, SizeError, ... and the C++ spellings config_error, size_error, ...);
a buffer of the wrong kind is a ValueError that says what was expected.

train(**options) runs sparsepush-train's training in this process and returns its summary as a
dict; RunSpec holds a run's settings (run_options() lists them) and plans its shards and rounds,
for a training loop of one's own (ShardSampler, init_model, RunSpec.lr).)doc";
  m.attr("__version__") = std::to_string(SPARSEPUSH_VERSION_MAJOR) + "." + std::to_string(SPARSEPUSH_VERSION_MINOR) + "." +
                          std::to_string(SPARSEPUSH_VERSION_PATCH);
#ifdef SPARSEPUSH_PYTHON_MPI
  m.attr("has_mpi") = true;
#else
  m.attr("has_mpi") = false;
#endif
#ifdef SPARSEPUSH_PYTHON_TRAIN
  m.attr("has_train") = true;  // the reference backend: train, RunSpec, init_model, load_fashion_mnist
#else
  m.attr("has_train") = false;
#endif
  bind_exceptions(m);
  bind_schedule(m);
  bind_compress(m);
  bind_network(m);
  bind_mpi(m);
  bind_node(m);
  bind_group(m);
  bind_data(m);
  bind_train(m);
  bind_run(m);
}
