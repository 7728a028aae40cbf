// python/bind_mpi.cpp: MpiNetwork, n nodes over the ranks of an MPI communicator (mpi4py's or
// MPI_COMM_WORLD), where the module is built with MPI; without it, a stand-in that refuses. Also,
// in every build, what a launcher says (launched(), launcher_environment(): the library's one list
// of the variables mpirun and torchrun set) and default_mpi_timeout.
#include <string>

#ifdef SPARSEPUSH_PYTHON_MPI
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#endif

#include "bindings.hpp"

#include <sparsepush/train/launcher.hpp>
#include <sparsepush/train/transport_options.hpp>

namespace sparsepush_python {

namespace {

/// What a launcher told this process as a dict, or None.
py::object launched() {
  const auto l = sp::launched_by();
  if (!l) return py::none();
  using namespace pybind11::literals;
  return py::dict("kind"_a = std::string(sp::to_string(l->kind)), "ranks"_a = l->ranks, "rank"_a = l->rank);
}

py::list launcher_environment() {
  using namespace pybind11::literals;
  py::list out;
  for (const sp::launcher_variables& l : sp::launcher_environment)
    out.append(py::dict("kind"_a = std::string(sp::to_string(l.kind)), "launcher"_a = std::string(l.who),
                        "size"_a = std::string(l.size), "rank"_a = std::string(l.rank),
                        "marker"_a = l.marker.empty() ? py::object(py::none()) : py::object(py::str(std::string(l.marker)))));
  return out;
}

/// What every build binds: the launcher's word and the default timeout.
void bind_launch(py::module_& m) {
  m.attr("default_mpi_timeout") = sp::default_mpi_timeout.count();
  m.def("launched", &launched,
        "launched() -> dict\n\nThe launcher that started this process, from its environment (launcher_environment(), "
        "the first that matches): {\"kind\": \"mpi\" or \"torch\", \"ranks\": N, \"rank\": r}, or None when none did.");
  m.def("launcher_environment", &launcher_environment,
        "launcher_environment() -> list\n\nThe environment variables of every launcher the library recognizes, in the "
        "order launched() looks for them: {\"kind\", \"launcher\", \"size\", \"rank\", \"marker\"} (a launcher "
        "matches when its marker, where it has one, is set and its size variable holds a positive count).");
}

}  // namespace

#ifdef SPARSEPUSH_PYTHON_MPI
namespace {

/// At exit, after a TransportError of an MpiNetwork (mpi_out_of_step): a line on stderr, then
/// MPI_Abort, which ends every rank of the job; MPI_Finalize would wait for the stalled rank, or
/// forever. Registered once, after whoever initialized MPI, so that it runs before their finalize.
void abort_if_out_of_step() {
  static bool registered = false;
  if (registered) return;
  registered = true;
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    int init = 0, fin = 0;
    MPI_Initialized(&init);
    MPI_Finalized(&fin);
    if (!mpi_out_of_step || !init || fin) return;
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "sparsepush: rank %d: a TransportError left MPI out of step; ending the job (MPI_Abort)\n",
                 rank);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }));
}

/// Initialize MPI (FUNNELED) and finalize it at exit, unless someone else (mpi4py) initialized it
/// first: then it is theirs to finalize. Either way a timed-out job ends at exit (abort_if_out_of_step).
void ensure_mpi() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (fin) throw sp::config_error("MPI was finalized already: an MpiNetwork cannot be built after MPI_Finalize");
  if (init) {
    abort_if_out_of_step();
    return;
  }
  // Open MPI loads its components as plugins that need libmpi's symbols: make them global, as an
  // MPI program linked the usual way has them (a Python extension is loaded RTLD_LOCAL).
  for (const char* lib : {"libmpi.so.40", "libmpi.so.12", "libmpi.so"})
    if (dlopen(lib, RTLD_NOW | RTLD_GLOBAL | RTLD_NOLOAD)) break;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    throw sp::config_error("MPI_Init_thread failed");
  py::module_::import("atexit").attr("register")(py::cpp_function([] {
    int f = 0;
    MPI_Finalized(&f);
    if (!f) MPI_Finalize();
  }));
  abort_if_out_of_step();  // registered after the finalize: runs before it
}

/// An MPI network of n nodes over comm (None: MPI_COMM_WORLD) with the options o.
std::unique_ptr<py_mpi> make_mpi_with(std::size_t n, py::object comm, const sp::mpi_options& o) {
  ensure_mpi();
  MPI_Comm c = MPI_COMM_WORLD;
  if (!comm.is_none()) {
    if (!py::hasattr(comm, "py2f"))
      throw py::type_error("sparsepush: comm must be an mpi4py communicator (with py2f()) or None");
    c = MPI_Comm_f2c(comm.attr("py2f")().cast<MPI_Fint>());
    if (c == MPI_COMM_NULL) throw sp::config_error("comm is MPI_COMM_NULL");
  }
  int size = 0;
  MPI_Comm_size(c, &size);
  if (n < static_cast<std::size_t>(size))
    throw sp::config_error("an MPI network of " + std::to_string(n) + " nodes over " + std::to_string(size) +
                           " ranks: every rank needs at least one node");
  auto p = std::make_unique<py_mpi>();
  p->thread = std::this_thread::get_id();
  p->comm = comm;
  {
    py::gil_scoped_release nogil;  // a collective: waits for the other ranks
    p->net = std::make_unique<sp::mpi_network>(c, n, o);
  }
  return p;
}

std::unique_ptr<py_mpi> make_mpi(std::size_t n, py::object comm, double timeout, const std::string& policy,
                                 double drop_probability, std::uint64_t seed) {
  if (n == 0) throw sp::config_error("an MPI network needs at least one node");
  if (!(timeout > 0.0) || timeout > 1e7) throw sp::config_error("MPI timeout must be positive seconds, got " + std::to_string(timeout));
  if (!(drop_probability >= 0.0 && drop_probability < 1.0))
    throw sp::config_error("drop_probability must be in [0, 1), got " + std::to_string(drop_probability));
  sp::mpi_options o;
  o.timeout = sp::mpi_timeout_of(timeout);
  o.policy = parse_policy(policy);
  o.drop_probability = drop_probability;
  o.seed = seed;
  return make_mpi_with(n, std::move(comm), o);
}

/// MpiNetwork's constructor's docstring, its default timeout the library's.
const char* mpi_doc() {
  static const std::string doc = "MpiNetwork(n, comm=None, timeout=" + py::repr(py::float_(sp::default_mpi_timeout.count())).cast<std::string>() +
                                 R"doc(, policy="lockstep", drop_probability=0.0, seed=0)

n nodes over the ranks of comm (an mpi4py communicator, or None: MPI_COMM_WORLD), a collective call.
MPI is initialized here (MPI_THREAD_FUNNELED, finalized at exit) unless it already is, e.g. by
mpi4py, which then keeps it. Every MPI call of the network must come from the thread that built it:
a rank drives its block of nodes from that thread (one PushSumNode per rank, or a PushSumGroup).
timeout: seconds any wait on other ranks may take before TransportError (default_mpi_timeout).
policy: the wait policy of the PushSumGroup that drives it (check_policy); a PushSumNode round needs
"lockstep". MpiNetwork.from_spec(spec) takes these from a RunSpec.)doc";
  return doc.c_str();
}

}  // namespace

void bind_mpi(py::module_& m) {
  bind_launch(m);
  py::class_<py_mpi>(m, "MpiNetwork",
                     "n nodes on the ranks of an MPI communicator, in contiguous blocks (rank r hosts "
                     "[first_node, first_node + local_nodes)).")
      .def(py::init(&make_mpi), py::arg("n"), py::arg("comm") = py::none(),
           py::arg("timeout") = sp::default_mpi_timeout.count(), py::arg("policy") = "lockstep",
           py::arg("drop_probability") = 0.0, py::arg("seed") = 0, mpi_doc())
#ifdef SPARSEPUSH_PYTHON_TRAIN
      .def_static(
          "from_spec",
          [](const sp::run_spec& s, py::object comm) { return make_mpi_with(s.nodes, std::move(comm), sp::mpi_options_for(s)); },
          py::arg("spec"), py::arg("comm") = py::none(),
          "from_spec(spec, comm=None) -> MpiNetwork\n\nThe network of a validated RunSpec, as sparsepush-train builds it: "
          "its nodes, mpi_timeout, drop_probability (keyed by seed) and waiting policy (staleness, overlap).")
#endif
      .def(
          "endpoint",
          [](py_mpi& n, std::uint32_t i) {
            n.check_thread("MpiNetwork.endpoint");
            return py_endpoint{n.net->endpoint(i), i, n.net->num_nodes(), &n};
          },
          py::arg("i"), py::keep_alive<0, 1>(), "endpoint(i) -> Endpoint\n\nNode i's endpoint; i must be one of this rank's nodes.")
      .def_property_readonly("num_nodes", [](const py_mpi& n) { return n.net->num_nodes(); })
      .def_property_readonly("first_node", [](const py_mpi& n) { return n.net->first_node(); }, "This rank's first node.")
      .def_property_readonly("local_nodes", [](const py_mpi& n) { return n.net->local_nodes(); }, "This rank's node count.")
      .def_property_readonly("rank", [](const py_mpi& n) { return n.net->rank(); })
      .def_property_readonly("ranks", [](const py_mpi& n) { return n.net->ranks(); })
      .def_property_readonly("policy", [](const py_mpi& n) { return sp::to_string(n.net->policy()); })
      .def("total_bytes", [](const py_mpi& n) { return n.net->total_bytes(); }, "Bytes sent by this rank's nodes so far.")
      .def("total_messages", [](const py_mpi& n) { return n.net->total_messages(); }, "Envelopes sent by this rank's nodes.")
      .def(
          "agree",
          [](py_mpi& n, const std::string& settings) {
            n.check_thread("MpiNetwork.agree");
            py::gil_scoped_release nogil;
            n.net->agree(settings);
          },
          py::arg("settings"),
          "agree(settings)\n\nCollective: every rank checks that all ranks pass the same settings string; a mismatch "
          "raises ConfigError on every rank naming the ranks that differ.")
      .def(
          "ordered_average",
          [](py_mpi& n, py::sequence models) {
            n.check_thread("MpiNetwork.ordered_average");
            if (py::len(models) != n.net->local_nodes())
              throw sp::size_error("ordered_average: " + std::to_string(py::len(models)) + " models for the " +
                                   std::to_string(n.net->local_nodes()) + " nodes of rank " +
                                   std::to_string(n.net->rank()));
            std::vector<held_buffer> held;
            for (std::size_t k = 0; k < py::len(models); ++k)
              held.push_back(take_buffer(models[k], "models[k]", false, dtype::f32));
            const std::size_t d = held.empty() ? 0 : held[0].span<float>().size();
            for (const auto& h : held)
              if (h.span<float>().size() != d) throw sp::size_error("ordered_average: models of different sizes");
            std::vector<float> avg(d, 0.0f);
            {
              py::gil_scoped_release nogil;
              if (!n.group) n.group = std::make_unique<sp::mpi_process_group>(*n.net);  // collective
              const auto nodes = static_cast<float>(n.net->num_nodes());
              n.group->ordered_sum(std::span<float>(avg), std::span<double>(), [&] {
                for (const auto& h : held) {
                  const auto m = h.span<float>();
                  for (std::size_t l = 0; l < d; ++l) avg[l] += m[l] / nodes;
                }
              });
            }
            return array_owning(std::move(avg));
          },
          py::arg("models"),
          R"doc(ordered_average(models) -> numpy float32 array

Collective: the average of every node's model over the ranks, sum_i (x_i / n) in float32, added in
node order (rank r adds its nodes' models, in order, to rank r - 1's sum and passes it on; the last
rank's sum reaches every rank), so the bits do not depend on timing and equal one process adding
every node in order (sparsepush-train's averaged model). models: this rank's nodes' models
(float32, of one size). Each rank but the last sends the d values once; the last sends the result
to every other rank.)doc")
      .def(
          "finish",
          [](py_mpi& n) {
            n.check_thread("MpiNetwork.finish");
            py::gil_scoped_release nogil;
            n.net->finish();
          },
          "finish()\n\nWait (up to the timeout) until every frame this rank sent has left; call before MPI is finalized.");
}

#else

void bind_mpi(py::module_& m) {
  bind_launch(m);
  m.def(
      "MpiNetwork",
      [](py::args, py::kwargs) -> py::object {
        throw sp::config_error("this sparsepush module was built without MPI (Debian package libopenmpi-dev); "
                               "sparsepush.has_mpi is False");
      },
      "Not available: this module was built without MPI.");
}

#endif

}  // namespace sparsepush_python
