// python/bindings.hpp: what the module's source files share. module.cpp's PYBIND11_MODULE calls
// one bind_<area>(m) per file (bind_exceptions.cpp, bind_schedule.cpp, ...); the Python-side
// wrappers of schedules, compressors, networks and endpoints live here because nodes and groups
// take them as arguments. Python memory comes in through buffers.hpp only.
#pragma once

#include <pybind11/pybind11.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>  // in every file: a type converts the same way in all of them

#include <sparsepush/sparsepush.hpp>
#ifdef SPARSEPUSH_PYTHON_MPI
#include <sparsepush/train/mpi.hpp>
#include <sparsepush/transport/mpi.hpp>
#endif

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <variant>

#include "buffers.hpp"

namespace sparsepush_python {
namespace sp = sparsepush;

// --- the module's parts, in the order module.cpp binds them -------------------------------------
void bind_exceptions(py::module_& m);  ///< sparsepush.Error and its subclasses, the C++ exceptions' translator
void bind_schedule(py::module_& m);    ///< Schedule, parse_schedule, check_policy, final_rounds_for
void bind_compress(py::module_& m);    ///< Compressor, Message, compress_with_feedback, encode, decode, default_eta
void bind_network(py::module_& m);     ///< Endpoint, LoopbackNetwork
void bind_mpi(py::module_& m);         ///< MpiNetwork (a stand-in that refuses, without MPI)
void bind_node(py::module_& m);        ///< PushSumNode
void bind_group(py::module_& m);       ///< PushSumGroup
void bind_data(py::module_& m);        ///< partition, ShardSampler, shard_seed, init_model, load_fashion_mnist
void bind_train(py::module_& m);       ///< RunSpec, RunPlan, run_options, train
void bind_run(py::module_& m);         ///< GossipRun, ExchangeNetwork: a run's algorithm over this process's nodes

/// sparsepush.DivergedError (bind_exceptions), raised by train() for a run that diverged.
PyObject* diverged_error_type();

#ifndef SPARSEPUSH_PYTHON_TRAIN
/// A stand-in for the function `name` in a module built without the reference backend (Eigen 3 and
/// zlib): it raises ConfigError saying so.
inline void refuse_without_train(py::module_& m, const char* name) {
  const std::string what = name;
  m.def(
      name,
      [what](py::args, py::kwargs) -> py::object {
        throw sp::config_error("sparsepush." + what + ": this module was built without the reference backend (Eigen 3 "
                               "and zlib: Debian packages libeigen3-dev zlib1g-dev); sparsepush.has_train is False");
      },
      "Not available: this module was built without Eigen 3 and zlib.");
}
#endif

// --- schedules, compressors, policies -----------------------------------------------------------

struct py_schedule {
  sp::any_schedule impl;
  std::string spec;
  std::uint64_t seed;
};

struct py_compressor {
  sp::any_compressor impl;
  std::string spec;
};

/// "lockstep", "overlap", "staleness:N" (0: lockstep), "asynchronous" or "asynchronous:W"; also
/// sparsepush-train's --staleness values "N" and "inf" (bind_schedule.cpp).
sp::wait_policy parse_policy(const std::string& s);

// --- networks and endpoints -------------------------------------------------------------------------

/// MpiNetworks alive in this process, and whether a TransportError reached Python while one was:
/// a wait that timed out leaves its requests active and the communicator out of step, so the
/// module's exit hook ends the job (MPI_Abort) instead of blocking in MPI_Finalize.
inline std::atomic<int> live_mpi_networks{0};
inline std::atomic<bool> mpi_out_of_step{false};

struct py_loopback {
  std::unique_ptr<sp::loopback_network> net;
};

#ifdef SPARSEPUSH_PYTHON_MPI
/// An MpiNetwork: the C++ network, the thread that built it (every MPI call of the network comes
/// from it) and the mpi4py communicator given, kept alive.
struct py_mpi {
  std::unique_ptr<sp::mpi_network> net;
  std::unique_ptr<sp::mpi_process_group> group;  ///< ordered_average()'s, built at its first call (freed first)
  std::thread::id thread;
  py::object comm;

  py_mpi() { ++live_mpi_networks; }
  py_mpi(const py_mpi&) = delete;
  py_mpi& operator=(const py_mpi&) = delete;
  ~py_mpi() {
    --live_mpi_networks;
    int fin = 0;
    MPI_Finalized(&fin);
    if (fin) (void)net.release();  // freeing its communicator after MPI_Finalize would abort
  }
  void check_thread(const char* what) const {
    if (std::this_thread::get_id() != thread)
      throw sp::config_error(std::string(what) +
                             ": every MPI call of an MpiNetwork must come from the thread that built it (drive this "
                             "rank's nodes from that thread, e.g. with a PushSumGroup)");
  }
};
#endif

/// A node's endpoint: a handle on a network the Python object keeps alive.
struct py_endpoint {
  std::variant<sp::loopback_endpoint
#ifdef SPARSEPUSH_PYTHON_MPI
               ,
               sp::mpi_endpoint
#endif
               >
      impl;
  std::uint32_t node;
  std::size_t nodes;          ///< of the network
  const void* mpi = nullptr;  ///< the py_mpi, for the thread check
};

// --- what nodes and groups share ------------------------------------------------------------------

/// A Python-side lock: a node (group) runs one call at a time; a second thread's call is refused
/// instead of racing on its state.
class busy_guard {
 public:
  busy_guard(std::mutex& mu, const std::string& who) : lock_(mu, std::try_to_lock) {
    if (!lock_.owns_lock())
      throw sp::config_error(who + " is in a call on another thread (one thread drives a node at a time)");
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

/// A flat numpy view of s that keeps `base` alive (no copy).
template <class T>
py::array_t<T> view_of(std::span<T> s, py::handle base) {
  return py::array_t<T>({static_cast<py::ssize_t>(s.size())}, {static_cast<py::ssize_t>(sizeof(T))}, s.data(), base);
}

/// A new flat numpy array holding a copy of s.
template <class T>
py::array_t<T> copy_of(std::span<const T> s) {
  py::array_t<T> a(static_cast<py::ssize_t>(s.size()));
  std::copy(s.begin(), s.end(), a.mutable_data());
  return a;
}

/// A numpy array that owns v (moved in, freed with the array): no copy of a large result.
template <class T>
py::array_t<T> array_owning(std::vector<T>&& v, std::vector<py::ssize_t> shape = {}) {
  auto* owned = new std::vector<T>(std::move(v));
  py::capsule base(owned, [](void* p) { delete static_cast<std::vector<T>*>(p); });
  if (shape.empty()) shape = {static_cast<py::ssize_t>(owned->size())};
  return py::array_t<T>(shape, owned->data(), base);
}

}  // namespace sparsepush_python
