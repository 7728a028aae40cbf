// python/module.cpp: the Python module `sparsepush` (pybind11). One push-sum node, a group of
// nodes, the loopback and MPI networks, schedules, compressors and the wire format, over the
// caller's own float32/float64 CPU memory (python/buffers.hpp: zero copy). Every call that
// computes or waits releases the GIL, so Python threads, one per node, run their rounds in
// parallel. The module does not link libtorch: torch tensors come in through DLPack.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>
#include <pybind11/numpy.h>

#include <sparsepush/sparsepush.hpp>
#ifdef SPARSEPUSH_PYTHON_MPI
#include <dlfcn.h>
#include <sparsepush/transport/mpi.hpp>
#endif

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <variant>
#include <vector>

#include "buffers.hpp"

namespace py = pybind11;
namespace sp = sparsepush;
using namespace sparsepush_python;

namespace {

// --- exceptions: the C++ sparsepush::error family as Python classes of the same names ----------

struct exception_types {
  PyObject* error = nullptr;
  PyObject* config = nullptr;
  PyObject* size = nullptr;
  PyObject* non_finite = nullptr;
  PyObject* decode = nullptr;
  PyObject* message = nullptr;
  PyObject* weight = nullptr;
  PyObject* schedule = nullptr;
  PyObject* transport = nullptr;
  PyObject* mpi = nullptr;
  PyObject* checkpoint = nullptr;
} exc;

PyObject* new_exception(py::module_& m, const char* name, const char* snake, const char* doc, py::tuple bases) {
  const std::string qual = std::string("sparsepush.") + name;
  PyObject* t = PyErr_NewExceptionWithDoc(qual.c_str(), doc, bases.ptr(), nullptr);
  if (!t) throw py::error_already_set();
  m.add_object(name, py::handle(t));
  m.add_object(snake, py::handle(t));  // the C++ name, as an alias
  return t;
}

void register_exceptions(py::module_& m) {
  auto b = [](auto... h) { return py::make_tuple(py::handle(h)...); };
  exc.error = new_exception(m, "Error", "error", "Base of every sparsepush error (C++ sparsepush::error).",
                            b(PyExc_RuntimeError));
  exc.config = new_exception(m, "ConfigError", "config_error",
                             "A parameter or configuration value is out of range (C++ sparsepush::config_error).",
                             b(exc.error, PyExc_ValueError));
  exc.size = new_exception(m, "SizeError", "size_error", "Two tensors that must agree in size do not (C++ sparsepush::size_error).",
                           b(exc.error, PyExc_ValueError));
  exc.non_finite = new_exception(m, "NonFiniteError", "non_finite_error",
                                 "An input or a mixed result holds NaN or Inf; .index is the first such position "
                                 "(C++ sparsepush::non_finite_error).",
                                 b(exc.error, PyExc_ArithmeticError));
  exc.decode = new_exception(m, "DecodeError", "decode_error",
                             "A byte buffer is not a valid encoded message; .offset is where decoding stopped "
                             "(C++ sparsepush::decode_error).",
                             b(exc.error, PyExc_ValueError));
  exc.message = new_exception(m, "MessageError", "message_error",
                              "A message breaks the wire format's rules (C++ sparsepush::message_error).", b(exc.error));
  exc.weight = new_exception(m, "WeightUnderflowError", "weight_underflow_error",
                             "A node's push-sum weight fell below its minimum (C++ sparsepush::weight_underflow_error).",
                             b(exc.error));
  exc.schedule = new_exception(m, "ScheduleError", "schedule_error",
                               "A schedule spec or graph is invalid (C++ sparsepush::schedule_error).",
                               b(exc.error, PyExc_ValueError));
  exc.transport = new_exception(m, "TransportError", "transport_error",
                                "A network failed: an envelope missing past the timeout, a peer gone "
                                "(C++ sparsepush::transport_error).",
                                b(exc.error));
  exc.mpi = new_exception(m, "MpiError", "mpi_error", "An MPI call failed (C++ sparsepush::mpi_error).", b(exc.transport));
  exc.checkpoint = new_exception(m, "CheckpointError", "checkpoint_error",
                                 "A checkpoint file could not be written or read (C++ sparsepush::checkpoint_error).",
                                 b(exc.error));
  py::register_exception_translator([](std::exception_ptr p) {
    if (!p) return;
    auto raise = [](PyObject* type, const char* what, const char* attr = nullptr, std::size_t value = 0) {
      py::object e = py::reinterpret_borrow<py::object>(type)(what);
      if (attr) e.attr(attr) = value;
      PyErr_SetObject(type, e.ptr());
    };
    try {
      std::rethrow_exception(p);
#ifdef SPARSEPUSH_PYTHON_MPI
    } catch (const sp::mpi_error& e) {
      raise(exc.mpi, e.what());
#endif
    } catch (const sp::transport_error& e) {
      raise(exc.transport, e.what());
    } catch (const sp::weight_underflow_error& e) {
      raise(exc.weight, e.what());
    } catch (const sp::config_error& e) {
      raise(exc.config, e.what());
    } catch (const sp::size_error& e) {
      raise(exc.size, e.what());
    } catch (const sp::non_finite_error& e) {
      raise(exc.non_finite, e.what(), "index", e.index());
    } catch (const sp::decode_error& e) {
      raise(exc.decode, e.what(), "offset", e.offset());
    } catch (const sp::message_error& e) {
      raise(exc.message, e.what());
    } catch (const sp::schedule_error& e) {
      raise(exc.schedule, e.what());
    } catch (const sp::checkpoint_error& e) {
      raise(exc.checkpoint, e.what());
    } catch (const sp::error& e) {
      raise(exc.error, e.what());
    }
  });
}

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
/// sparsepush-train's --staleness values "N" and "inf".
sp::wait_policy parse_policy(const std::string& s) {
  auto number = [&](std::string_view v) {
    std::uint64_t x = 0;
    bool ok = !v.empty() && v.size() <= 10;
    for (const char c : v) ok = ok && c >= '0' && c <= '9', x = x * 10 + static_cast<std::uint64_t>(c - '0');
    if (!ok || x > 0xffffffffull)
      throw sp::config_error("policy '" + s + "': '" + std::string(v) + "' is not a whole number");
    return static_cast<std::uint32_t>(x);
  };
  if (s == "lockstep") return sp::wait_policy{};
  if (s == "overlap") return sp::wait_policy::overlap();
  if (s == "asynchronous" || s == "async" || s == "inf") return sp::wait_policy::asynchronous();
  if (s.rfind("asynchronous:", 0) == 0) return sp::wait_policy::asynchronous(number(std::string_view(s).substr(13)));
  if (s.rfind("staleness:", 0) == 0) return sp::wait_policy::staleness(number(std::string_view(s).substr(10)));
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) return sp::wait_policy::staleness(number(s));
  throw sp::config_error("unknown wait policy '" + s +
                         "' (known: lockstep, overlap, staleness:N, asynchronous, asynchronous:W)");
}

// --- networks ------------------------------------------------------------------------------------

struct py_loopback {
  std::unique_ptr<sp::loopback_network> net;
};

#ifdef SPARSEPUSH_PYTHON_MPI
/// Initialize MPI (FUNNELED) and finalize it at exit, unless someone else (mpi4py) initialized it
/// first: then it is theirs to finalize.
void ensure_mpi() {
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (fin) throw sp::config_error("MPI was finalized already: an MpiNetwork cannot be built after MPI_Finalize");
  if (init) return;
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
}

struct py_mpi {
  std::unique_ptr<sp::mpi_network> net;
  std::thread::id thread;  ///< every MPI call of the network comes from this thread
  py::object comm;         ///< the mpi4py communicator given, kept alive

  ~py_mpi() {
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
  std::size_t nodes;  ///< of the network
  const void* mpi = nullptr;  ///< the py_mpi, for the thread check
};

// --- messages ---------------------------------------------------------------------------------------

struct py_message {
  sp::message m;
};

py::array_t<double> message_values(const sp::message& m) {
  py::array_t<double> out(static_cast<py::ssize_t>(m.count));
  auto* o = out.mutable_data();
  std::size_t j = 0;
  sp::for_each_value<double>(m, [&](std::uint32_t, double v) { o[j++] = v; });
  return out;
}

// --- nodes ---------------------------------------------------------------------------------------------

template <class T>
using node_t = sp::push_sum_node<std::span<T>>;

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

struct py_node {
  held_buffer x;
  std::variant<std::unique_ptr<node_t<float>>, std::unique_ptr<node_t<double>>> node;
  std::mutex busy;

  std::string who() const {
    return "node " + std::to_string(std::visit([](const auto& n) { return n->id(); }, node));
  }
};

/// Check what the C++ round trusts its caller for: the ids, node counts and thread.
void check_round_parts(std::uint32_t id, const py_schedule& s, const py_endpoint& ep, std::uint32_t t) {
  if (id >= s.impl.num_nodes())
    throw sp::config_error("round " + std::to_string(t) + ": node " + std::to_string(id) + " is outside the schedule's " +
                           std::to_string(s.impl.num_nodes()) + " nodes");
  if (ep.nodes != s.impl.num_nodes())
    throw sp::config_error("round " + std::to_string(t) + ", node " + std::to_string(id) + ": the network has " +
                           std::to_string(ep.nodes) + " nodes, the schedule " + std::to_string(s.impl.num_nodes()));
  if (ep.node != id)
    throw sp::config_error("round " + std::to_string(t) + ": node " + std::to_string(id) + " was given node " +
                           std::to_string(ep.node) + "'s endpoint");
#ifdef SPARSEPUSH_PYTHON_MPI
  if (ep.mpi)
    static_cast<const py_mpi*>(ep.mpi)->check_thread(("round " + std::to_string(t) + ", node " + std::to_string(id)).c_str());
#endif
}

template <class T>
py::array_t<T> view_of(std::span<T> s, py::handle base) {
  return py::array_t<T>({static_cast<py::ssize_t>(s.size())}, {static_cast<py::ssize_t>(sizeof(T))}, s.data(), base);
}

template <class T>
py::array_t<T> copy_of(std::span<const T> s) {
  py::array_t<T> a(static_cast<py::ssize_t>(s.size()));
  std::copy(s.begin(), s.end(), a.mutable_data());
  return a;
}

void node_save(const std::string& path, const auto& node) {
  sp::checkpoint_writer w;
  node.save(w);
  sp::write_file_atomic(path, w.finish());
}

template <class N>
void node_restore(const std::string& path, N& node) {
  const std::vector<std::byte> bytes = sp::read_file_bytes(path);
  sp::checkpoint_reader r(bytes, path);
  auto state = node.read_state(r);
  r.done();
  node.restore(state);
}

// --- groups --------------------------------------------------------------------------------------------

template <class T>
using group_t = sp::push_sum_group<std::span<T>>;

struct py_group {
  std::vector<held_buffer> xs;
  std::variant<std::unique_ptr<group_t<float>>, std::unique_ptr<group_t<double>>> group;
  std::mutex busy;

  sp::wait_policy policy() const {
    return std::visit([](const auto& g) { return g->policy(); }, group);
  }
};

/// Run f(net) on the C++ network behind `network`, a LoopbackNetwork or an MpiNetwork, with the
/// GIL released. An MpiNetwork only from the thread that built it (`what` names the call) and,
/// where `policy` is given, only of that wait policy.
template <class F>
void on_network(py::handle network, [[maybe_unused]] const char* what, [[maybe_unused]] const sp::wait_policy* policy,
                F&& f) {
  if (py::isinstance<py_loopback>(network)) {
    auto& net = *network.cast<py_loopback&>().net;
    py::gil_scoped_release nogil;
    f(net);
    return;
  }
#ifdef SPARSEPUSH_PYTHON_MPI
  if (py::isinstance<py_mpi>(network)) {
    auto& pm = network.cast<py_mpi&>();
    pm.check_thread(what);
    if (policy && !(pm.net->policy() == *policy))
      throw sp::config_error("the group's policy is " + sp::to_string(*policy) + ", the MpiNetwork's " +
                             sp::to_string(pm.net->policy()) + ": build both with the same policy");
    py::gil_scoped_release nogil;
    f(*pm.net);
    return;
  }
#endif
  throw py::type_error("sparsepush: network must be a LoopbackNetwork or an MpiNetwork");
}

const char* const round_doc = R"doc(round(t, schedule, compressor, endpoint, eta=1.0, direction=None, gamma=0.0, feedback=True, fresh_residual=False)

One push-sum round t of this node (ALGORITHMS.md, Sparse-Push steps 1-3), in lockstep:

  1. local step   x_i <- x_i - gamma * direction          (when direction is given)
  2. compress     v_i = x_i + e_i;  q_i = C(v_i);  e_i <- v_i - q_i
                  (feedback=False: q_i = C(x_i), e_i untouched; fresh_residual=True:
                  e_i <- 0 first, as a phase that starts its own residual, e.g. SCSP's
                  compressed final rounds)
  3. post         (i, W[r][i], u_i, q_i) to every out-neighbour r of round t
  4. collect      round t's envelopes from exactly the in-neighbours
  5. mix          x_i <- x_i + eta * (sum_{j in in(i) + {i}} W_ij q_j - q_i)
                  u_i <- u_i + eta * (sum_{j in in(i) + {i}} W_ij u_j - u_i)

W is the schedule's column-stochastic matrix of round t; the de-biased model is x_i / u_i.
At eta = 1 with an exact compressor this is push-sum's x_i = sum_j W_ij x_j, bit for bit.

x is the caller's buffer: the round writes it in place. direction (float buffer of the node's
dtype and size) is read without a copy. Everything is checked before anything changes (eta in
(0, 1], sizes, NaN/Inf, the schedule's column); a failed check raises and leaves x, u and e as
they were. The GIL is released for the whole round, waits included, so one Python thread per
node runs the nodes in parallel. Raises TransportError when an in-neighbour's envelope does not
come within the network's timeout.)doc";

}  // namespace

PYBIND11_MODULE(sparsepush, m) {
  py::options options;
  options.disable_function_signatures();  // every docstring starts with its own signature
  m.doc() = R"doc(sparsepush: Sparse-Push and push-sum gossip over directed, time-varying graphs.

The nodes' models live in the caller's own memory: a C-contiguous float32/float64 numpy array or
torch CPU tensor given to PushSumNode (or PushSumGroup) is the node's x, updated in place by every
round. The module does not link libtorch (torch tensors come in through DLPack). Every call that
computes or waits releases the GIL. Errors are sparsepush.Error and its subclasses, named as the
C++ exceptions (ConfigError, SizeError, ... and the C++ spellings config_error, size_error, ...);
a buffer of the wrong kind is a ValueError that says what was expected.)doc";
  m.attr("__version__") = std::to_string(SPARSEPUSH_VERSION_MAJOR) + "." + std::to_string(SPARSEPUSH_VERSION_MINOR) + "." +
                          std::to_string(SPARSEPUSH_VERSION_PATCH);
#ifdef SPARSEPUSH_PYTHON_MPI
  m.attr("has_mpi") = true;
#else
  m.attr("has_mpi") = false;
#endif
  register_exceptions(m);

  // --- Schedule ---------------------------------------------------------------------------------
  py::class_<py_schedule, std::shared_ptr<py_schedule>>(m, "Schedule",
                                                         "A time-varying directed graph and its column-stochastic weights "
                                                         "(built by parse_schedule).")
      .def_property_readonly("num_nodes", [](const py_schedule& s) { return s.impl.num_nodes(); }, "Nodes of the schedule.")
      .def_property_readonly("period", [](const py_schedule& s) { return s.impl.period(); },
                             "Rounds after which the graphs repeat (1: static).")
      .def_property_readonly("spec", [](const py_schedule& s) { return s.spec; }, "The spec string it was built from.")
      .def(
          "out_edges",
          [](const py_schedule& s, std::uint64_t t, std::uint32_t i) {
            if (i >= s.impl.num_nodes()) throw sp::config_error("node " + std::to_string(i) + " outside [0, " + std::to_string(s.impl.num_nodes()) + ")");
            std::vector<sp::out_edge> out;
            s.impl.out_edges(t, i, out);
            std::vector<std::pair<std::uint32_t, double>> r;
            for (const auto& e : out) r.emplace_back(e.to, e.share);
            return r;
          },
          py::arg("t"), py::arg("node"),
          "Column `node` of W(t): a list of (receiver, share W[receiver][node]); the shares sum to 1 and include the "
          "node's own share.")
      .def(
          "in_edges",
          [](const py_schedule& s, std::uint64_t t, std::uint32_t i) {
            if (i >= s.impl.num_nodes()) throw sp::config_error("node " + std::to_string(i) + " outside [0, " + std::to_string(s.impl.num_nodes()) + ")");
            std::vector<sp::in_edge> in;
            s.impl.in_edges(t, i, in);
            std::vector<std::pair<std::uint32_t, double>> r;
            for (const auto& e : in) r.emplace_back(e.from, e.share);
            return r;
          },
          py::arg("t"), py::arg("node"), "Row `node` of W(t): a list of (sender, share W[node][sender]).")
      .def("__repr__", [](const py_schedule& s) {
        return "sparsepush.parse_schedule('" + s.spec + "', " + std::to_string(s.impl.num_nodes()) + ", seed=" +
               std::to_string(s.seed) + ")";
      });

  m.def(
      "parse_schedule",
      [](const std::string& spec, std::size_t n, std::uint64_t seed) {
        return std::make_shared<py_schedule>(py_schedule{sp::parse_schedule(spec, n, seed), spec, seed});
      },
      py::arg("spec"), py::arg("n"), py::arg("seed") = 0,
      R"doc(parse_schedule(spec, n, seed=0) -> Schedule

The schedule a spec names for n nodes (seed keys the random ones), validated (every column
stochastic). Specs: directed-ring, undirected-ring, torus:RxC, complete, time-varying-ring[:h1,h2,...],
alternating-ring, exponential, exponential:K, bidirectional-exponential, erdos-renyi:P, random:K.
Raises ScheduleError naming what is wrong.)doc");

  // --- Compressor -------------------------------------------------------------------------------
  py::class_<py_compressor, std::shared_ptr<py_compressor>>(m, "Compressor", "A compression operator C (built by parse_compressor).")
      .def_property_readonly("spec", [](const py_compressor& c) { return c.spec; }, "The spec string it was built from.")
      .def("__repr__", [](const py_compressor& c) { return "sparsepush.parse_compressor('" + c.spec + "')"; });
  m.def(
      "parse_compressor",
      [](const std::string& spec) { return std::make_shared<py_compressor>(py_compressor{sp::parse_compressor(spec), spec}); },
      py::arg("spec"),
      R"doc(parse_compressor(spec) -> Compressor

A compressor from its spec: identity | top-k:F | random-k:F | random-k-unbiased:F | threshold:F |
qsgd:S[:philox7|:philox10] | sign, F a fraction in (0, 1] or a count, optionally followed by a value encoding
(+fp32 +fp16 +bf16 +int8 +sign +qsgd:S[:R]) and an index encoding (+u32 +varint), e.g. "top-k:0.01+int8".
Raises ConfigError naming the bad part.)doc");

  m.def(
      "check_policy", [](const std::string& spec) { return sp::to_string(parse_policy(spec)); }, py::arg("spec"),
      R"doc(check_policy(spec) -> str

The canonical name of a wait policy (ALGORITHMS.md, "Asynchronous and overlapped push-sum"):
"lockstep" (wait for every envelope of round t), "overlap" (mix exactly round t-1's envelopes),
"staleness:N" (wait only for rounds <= t - N), "asynchronous[:W]" (never wait; W rounds of
envelopes held per in-neighbour, 16 by default). Also takes sparsepush-train's --staleness values
("0", "N", "inf"). Raises ConfigError for anything else.)doc");

  // --- Message, compression, wire ------------------------------------------------------------------
  py::class_<py_message, std::shared_ptr<py_message>>(m, "Message", "One compressed vector q, as it travels.")
      .def_property_readonly("dim", [](const py_message& q) { return q.m.dim; }, "Length d of the vector it describes.")
      .def_property_readonly("count", [](const py_message& q) { return q.m.count; }, "Values carried (== dim when dense).")
      .def_property_readonly("dense", [](const py_message& q) { return q.m.dense(); }, "Whether it carries every coordinate.")
      .def_property_readonly("wire_bytes", [](const py_message& q) { return q.m.wire_bytes(); }, "len(encode(message)).")
      .def_property_readonly(
          "indices",
          [](const py_message& q) {
            py::array_t<std::uint32_t> a(static_cast<py::ssize_t>(q.m.count));
            for (std::uint32_t j = 0; j < q.m.count; ++j) a.mutable_data()[j] = q.m.index_of(j);
            return a;
          },
          "The coordinates of the values (a new uint32 array, ascending).")
      .def_property_readonly("values", [](const py_message& q) { return message_values(q.m); },
                             "The values as the receivers read them (a new float64 array, in index order).")
      .def(
          "to_dense",
          [](const py_message& q) {
            py::array_t<double> a(static_cast<py::ssize_t>(q.m.dim));
            std::fill(a.mutable_data(), a.mutable_data() + q.m.dim, 0.0);
            sp::for_each_value<double>(q.m, [&](std::uint32_t i, double v) { a.mutable_data()[i] = v; });
            return a;
          },
          "The dense vector q (a new float64 array, zeros where it carries nothing).")
      .def("__repr__", [](const py_message& q) {
        return "<sparsepush.Message dim=" + std::to_string(q.m.dim) + " count=" + std::to_string(q.m.count) +
               " wire_bytes=" + std::to_string(q.m.wire_bytes()) + ">";
      });

  m.def(
      "compress_with_feedback",
      [](const py_compressor& c, py::handle x, py::handle residual, std::uint64_t seed, std::uint32_t node,
         std::uint32_t round) {
        held_buffer e = take_buffer(residual, "residual", true);
        held_buffer xb = take_buffer(x, "x", false, e.type);
        if (xb.size != e.size)
          throw sp::size_error("compress_with_feedback (node " + std::to_string(node) + ", round " + std::to_string(round) +
                               "): x has " + std::to_string(xb.size) + " elements, the residual " + std::to_string(e.size));
        auto q = std::make_shared<py_message>();
        const sp::context ctx{seed, node, round};
        py::gil_scoped_release nogil;
        if (e.type == dtype::f32) {
          const auto ev = e.span<float>();
          sp::detail::check_finite(std::span<const float>(ev), ctx, "residual");
          sp::compress_with_feedback<float>(c.impl, std::span<const float>(xb.span<float>()), ev, q->m, ctx);
        } else {
          const auto ev = e.span<double>();
          sp::detail::check_finite(std::span<const double>(ev), ctx, "residual");
          sp::compress_with_feedback<double>(c.impl, std::span<const double>(xb.span<double>()), ev, q->m, ctx);
        }
        return q;
      },
      py::arg("compressor"), py::arg("x"), py::arg("residual"), py::arg("seed"), py::arg("node"), py::arg("round"),
      R"doc(compress_with_feedback(compressor, x, residual, seed, node, round) -> Message

Error-compensated compression:  v = x + e;  q = C(v);  e <- v - q.
x (read) and residual (written in place) are float32/float64 buffers of one dtype and size, taken
without a copy. (seed, node, round) key the compressor's random choices, exactly as in a node's
round. Returns q. The GIL is released while it compresses.)doc");

  m.def(
      "encode",
      [](const py_message& q) {
        std::vector<std::byte> out;
        {
          py::gil_scoped_release nogil;
          out = sp::encode(q.m);
        }
        return py::bytes(reinterpret_cast<const char*>(out.data()), out.size());
      },
      py::arg("message"),
      "encode(message) -> bytes\n\nThe wire encoding of a message (header, indices, values, CRC-32); "
      "len(result) == message.wire_bytes.");

  m.def(
      "decode",
      [](py::buffer data, std::uint32_t dim) {
        py::buffer_info info = data.request();
        if (info.ndim != 1 || info.itemsize != 1 || (info.strides.size() == 1 && info.strides[0] != 1))
          throw py::value_error("sparsepush: decode takes a contiguous bytes-like object (bytes, bytearray, memoryview)");
        const std::span<const std::byte> buf(static_cast<const std::byte*>(info.ptr), static_cast<std::size_t>(info.size));
        auto q = std::make_shared<py_message>();
        {
          py::gil_scoped_release nogil;
          sp::message scratch;
          sp::decode(buf, q->m, dim, scratch);
        }
        return q;
      },
      py::arg("data"), py::arg("dim"),
      "decode(data, dim) -> Message\n\nParse and fully validate an encoded message for a vector of dim elements. "
      "Raises DecodeError (with .offset) on any truncated, corrupted or inconsistent buffer, or one announcing "
      "another dim.");

  // --- networks ----------------------------------------------------------------------------------
  py::class_<py_endpoint>(m, "Endpoint", "Node i's handle on a network (from network.endpoint(i)).")
      .def_property_readonly("node", [](const py_endpoint& e) { return e.node; }, "The node it belongs to.")
      .def("__repr__", [](const py_endpoint& e) { return "<sparsepush.Endpoint node=" + std::to_string(e.node) + ">"; });

  py::class_<py_loopback>(m, "LoopbackNetwork",
                          "n nodes in one process: each node's round runs on its own Python thread; envelopes go "
                          "through memory (encoded=True: encoded and decoded as over a real network).")
      .def(py::init([](std::size_t n, bool encoded, double drop_probability, std::uint64_t seed, double timeout,
                       std::uint32_t max_delay) {
             if (n == 0) throw sp::config_error("a loopback network needs at least one node");
             if (!(timeout > 0.0) || timeout > 1e7) throw sp::config_error("loopback timeout must be positive seconds, got " + std::to_string(timeout));
             if (!(drop_probability >= 0.0 && drop_probability < 1.0))
               throw sp::config_error("drop_probability must be in [0, 1), got " + std::to_string(drop_probability));
             sp::loopback_options o;
             o.mode = encoded ? sp::loopback_mode::encoded : sp::loopback_mode::copied;
             o.drop_probability = drop_probability;
             o.seed = seed;
             o.timeout = std::chrono::milliseconds(std::max<long long>(1, static_cast<long long>(timeout * 1000.0)));
             o.max_delay = max_delay;
             return py_loopback{std::make_unique<sp::loopback_network>(n, o)};
           }),
           py::arg("n"), py::arg("encoded") = true, py::arg("drop_probability") = 0.0, py::arg("seed") = 0,
           py::arg("timeout") = 60.0, py::arg("max_delay") = 0,
           R"doc(LoopbackNetwork(n, encoded=True, drop_probability=0.0, seed=0, timeout=60.0, max_delay=0)

n node endpoints in one process. encoded=True: every envelope is encoded to its wire frame and
decoded (validated) at the receiver; False: copied. Both are safe for nodes on free-running
threads and give the same bits. drop_probability loses each non-self envelope with that
probability (keyed by seed). timeout: seconds a node waits for a missing envelope before it raises
TransportError. max_delay: the seeded delay model of deferred rounds (PushSumGroup with a policy
other than lockstep).)doc")
      .def("endpoint",
           [](py_loopback& n, std::uint32_t i) {
             return py_endpoint{n.net->endpoint(i), i, n.net->num_nodes(), nullptr};
           },
           py::arg("i"), py::keep_alive<0, 1>(), "endpoint(i) -> Endpoint\n\nNode i's endpoint (the network lives as long as it).")
      .def_property_readonly("num_nodes", [](const py_loopback& n) { return n.net->num_nodes(); })
      .def("total_bytes", [](const py_loopback& n) { return n.net->total_bytes(); },
           "Bytes of every envelope sent so far (encoded frame sizes, whatever the mode).")
      .def("total_messages", [](const py_loopback& n) { return n.net->total_messages(); }, "Envelopes sent so far.")
      .def("bytes_sent", [](const py_loopback& n, std::uint32_t i) { return n.net->bytes_sent(i); }, py::arg("node"),
           "Bytes node i has sent.")
      .def("messages_dropped", [](const py_loopback& n) { return n.net->messages_dropped(); }, "Envelopes lost so far.");

#ifdef SPARSEPUSH_PYTHON_MPI
  py::class_<py_mpi>(m, "MpiNetwork",
                     "n nodes on the ranks of an MPI communicator, in contiguous blocks (rank r hosts "
                     "[first_node, first_node + local_nodes)).")
      .def(py::init([](std::size_t n, py::object comm, double timeout, const std::string& policy, double drop_probability,
                       std::uint64_t seed) {
             if (n == 0) throw sp::config_error("an MPI network needs at least one node");
             if (!(timeout > 0.0) || timeout > 1e7) throw sp::config_error("MPI timeout must be positive seconds, got " + std::to_string(timeout));
             if (!(drop_probability >= 0.0 && drop_probability < 1.0))
               throw sp::config_error("drop_probability must be in [0, 1), got " + std::to_string(drop_probability));
             sp::mpi_options o;
             o.timeout = std::chrono::milliseconds(std::max<long long>(1, static_cast<long long>(timeout * 1000.0)));
             o.policy = parse_policy(policy);
             o.drop_probability = drop_probability;
             o.seed = seed;
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
           }),
           py::arg("n"), py::arg("comm") = py::none(), py::arg("timeout") = 60.0, py::arg("policy") = "lockstep",
           py::arg("drop_probability") = 0.0, py::arg("seed") = 0,
           R"doc(MpiNetwork(n, comm=None, timeout=60.0, policy="lockstep", drop_probability=0.0, seed=0)

n nodes over the ranks of comm (an mpi4py communicator, or None: MPI_COMM_WORLD), a collective call.
MPI is initialized here (MPI_THREAD_FUNNELED, finalized at exit) unless it already is, e.g. by
mpi4py, which then keeps it. Every MPI call of the network must come from the thread that built it:
a rank drives its block of nodes from that thread (one PushSumNode per rank, or a PushSumGroup).
timeout: seconds any wait on other ranks may take before TransportError. policy: the wait policy of
the PushSumGroup that drives it (check_policy); a PushSumNode round needs "lockstep".)doc")
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
          "finish",
          [](py_mpi& n) {
            n.check_thread("MpiNetwork.finish");
            py::gil_scoped_release nogil;
            n.net->finish();
          },
          "finish()\n\nWait (up to the timeout) until every frame this rank sent has left; call before MPI is finalized.");
#else
  m.def(
      "MpiNetwork",
      [](py::args, py::kwargs) -> py::object {
        throw sp::config_error("this sparsepush module was built without MPI (Debian package libopenmpi-dev); "
                               "sparsepush.has_mpi is False");
      },
      "Not available: this module was built without MPI.");
#endif

  // --- PushSumNode -----------------------------------------------------------------------------------
  py::class_<py_node>(m, "PushSumNode",
                      "One push-sum node over the caller's buffer x (zero copy): x is the push-sum numerator x_i, "
                      "updated in place by round(); weight is u_i; the model is x_i / u_i.")
      .def(py::init([](py::handle x, std::uint32_t id, std::uint64_t seed, bool feedback) {
             auto p = std::make_unique<py_node>();
             p->x = take_buffer(x, "x", true);
             const sp::node_options o{id, seed, feedback, sp::loss_recovery::none};
             if (p->x.type == dtype::f32) p->node = std::make_unique<node_t<float>>(p->x.span<float>(), o);
             else p->node = std::make_unique<node_t<double>>(p->x.span<double>(), o);
             return p;
           }),
           py::arg("x"), py::arg("id"), py::arg("seed") = 0, py::arg("feedback") = true,
           R"doc(PushSumNode(x, id, seed=0, feedback=True)

Node `id` of a run, its numerator x_i being x itself: a C-contiguous float32/float64 numpy array
or torch CPU tensor (any shape, read as flat), taken without a copy and written in place by every
round (the node keeps x alive). u_i starts at 1. seed keys the compressors' random choices with
(node, round). feedback=True keeps an error-feedback residual e_i (starting at 0).
Raises ValueError for a buffer of the wrong kind, NonFiniteError for a NaN/Inf in x.)doc")
      .def("round",
           [](py_node& self, std::uint32_t t, const py_schedule& s, const py_compressor& c, py_endpoint& ep, double eta,
              py::object direction, double gamma, bool feedback, bool fresh_residual) {
             busy_guard g(self.busy, self.who());
             std::optional<held_buffer> dir;
             if (!direction.is_none()) dir = take_buffer(direction, "direction", false, self.x.type);
             std::visit(
                 [&](auto& n) {
                   using N = std::remove_reference_t<decltype(*n)>;
                   using T = typename N::value_type;
                   check_round_parts(n->id(), s, ep, t);
                   // a direction of the wrong size is the node's check()'s size_error
                   typename N::step st{eta, dir ? std::span<const T>(dir->span<T>()) : std::span<const T>(), gamma,
                                       feedback, fresh_residual};
                   py::gil_scoped_release nogil;
                   std::visit([&](auto& e) { n->round(t, s.impl, c.impl, e, st); }, ep.impl);
                 },
                 self.node);
           },
           py::arg("t"), py::arg("schedule"), py::arg("compressor"), py::arg("endpoint"), py::arg("eta") = 1.0,
           py::arg("direction") = py::none(), py::arg("gamma") = 0.0, py::arg("feedback") = true,
           py::arg("fresh_residual") = false, round_doc)
      .def(
          "debiased",
          [](py_node& self, py::handle out) {
            busy_guard g(self.busy, self.who());
            held_buffer o = take_buffer(out, "out", true, self.x.type);
            std::visit(
                [&](auto& n) {
                  using T = typename std::remove_reference_t<decltype(*n)>::value_type;
                  if (o.size != n->dim())
                    throw sp::size_error("debiased: out has " + std::to_string(o.size) + " elements, node " +
                                         std::to_string(n->id()) + "'s model has " + std::to_string(n->dim()));
                  py::gil_scoped_release nogil;
                  n->debiased(o.span<T>());
                },
                self.node);
            return py::reinterpret_borrow<py::object>(out);
          },
          py::arg("out"),
          "debiased(out) -> out\n\nWrite the de-biased model x_i / u_i into out (a buffer of the node's dtype and size, "
          "written in place, no copy) and return it.")
      .def(
          "model",
          [](py_node& self) -> py::object {
            busy_guard g(self.busy, self.who());
            return std::visit(
                [&](auto& n) -> py::object {
                  using T = typename std::remove_reference_t<decltype(*n)>::value_type;
                  py::array_t<T> a(static_cast<py::ssize_t>(n->dim()));
                  n->debiased(std::span<T>(a.mutable_data(), n->dim()));
                  return a;
                },
                self.node);
          },
          "model() -> numpy.ndarray\n\nThe de-biased model x_i / u_i as a new flat array of the node's dtype.")
      .def_property_readonly(
          "weight", [](py_node& self) { return std::visit([](auto& n) { return n->u(); }, self.node); },
          "The push-sum weight u_i (a float).")
      .def_property_readonly(
          "x",
          [](py::object o) -> py::object {
            auto& self = o.cast<py_node&>();
            return std::visit([&](auto& n) -> py::object { return view_of(n->x(), o); }, self.node);
          },
          "x_i as a flat numpy view of the caller's buffer (no copy).")
      .def_property_readonly(
          "residual",
          [](py_node& self) -> py::object {
            return std::visit([](auto& n) -> py::object { return copy_of(n->residual()); }, self.node);
          },
          "The error-feedback residual e_i (a new array; empty without feedback).")
      .def_property_readonly("id", [](py_node& self) { return std::visit([](auto& n) { return n->id(); }, self.node); })
      .def_property_readonly("dim", [](py_node& self) { return std::visit([](auto& n) { return n->dim(); }, self.node); })
      .def_property_readonly("dtype", [](py_node& self) { return std::string(dtype_name(self.x.type)); },
                             "'float32' or 'float64'.")
      .def_property_readonly("buffer", [](py_node& self) { return self.x.owner; }, "The object x was taken from.")
      .def(
          "save",
          [](py_node& self, const std::string& path) {
            busy_guard g(self.busy, self.who());
            std::visit([&](auto& n) {
              py::gil_scoped_release nogil;
              node_save(path, *n);
            }, self.node);
          },
          py::arg("path"),
          "save(path)\n\nWrite the node's state (id, dim, u, x, e) to a checkpoint file, atomically (a crash leaves the "
          "old file or the new one). Call between rounds.")
      .def(
          "restore",
          [](py_node& self, const std::string& path) {
            busy_guard g(self.busy, self.who());
            std::visit([&](auto& n) {
              py::gil_scoped_release nogil;
              node_restore(path, *n);
            }, self.node);
          },
          py::arg("path"),
          "restore(path)\n\nRead a checkpoint written by save() into this node (x is written into the caller's buffer). "
          "The file is checked first (CRC, node id, dim, residual, finite values): on CheckpointError nothing changed.")
      .def("__repr__", [](py_node& self) {
        return std::visit(
            [&](auto& n) {
              return "<sparsepush.PushSumNode id=" + std::to_string(n->id()) + " dim=" + std::to_string(n->dim()) +
                     " dtype=" + dtype_name(self.x.type) + " weight=" + std::to_string(n->u()) + ">";
            },
            self.node);
      });

  // --- PushSumGroup -------------------------------------------------------------------------------------
  py::class_<py_group>(m, "PushSumGroup",
                       "Several push-sum nodes driven by one thread (a rank's block over MPI), in lockstep or with a "
                       "wait policy: overlap, bounded staleness, asynchronous.")
      .def(py::init([](py::sequence xs, std::uint32_t first_node, std::size_t total_nodes, std::uint64_t seed, bool feedback,
                       const std::string& policy, std::size_t threads, double eta) {
             auto p = std::make_unique<py_group>();
             if (py::len(xs) == 0) throw sp::config_error("a push-sum group needs at least one node");
             for (std::size_t i = 0; i < py::len(xs); ++i) {
               p->xs.push_back(take_buffer(xs[i], "xs[i]", true));
               if (p->xs.back().type != p->xs.front().type)
                 throw py::value_error("sparsepush: xs[" + std::to_string(i) + "] is " + dtype_name(p->xs.back().type) +
                                       ", xs[0] " + dtype_name(p->xs.front().type) + ": every node of a group has one dtype");
             }
             if (threads < 1 || threads > 256) throw sp::config_error("threads must be in [1, 256], got " + std::to_string(threads));
             sp::gossip_options o;
             o.eta = eta;
             o.error_feedback = feedback;
             o.threads = threads;
             o.seed = seed;
             o.first_node = first_node;
             o.total_nodes = total_nodes;
             o.policy = parse_policy(policy);
             auto build = [&](auto tag) {
               using T = decltype(tag);
               std::vector<std::span<T>> v;
               for (auto& h : p->xs) v.push_back(h.span<T>());
               return std::make_unique<group_t<T>>(std::move(v), o);
             };
             if (p->xs.front().type == dtype::f32) p->group = build(float{});
             else p->group = build(double{});
             return p;
           }),
           py::arg("xs"), py::arg("first_node") = 0, py::arg("total_nodes") = 0, py::arg("seed") = 0,
           py::arg("feedback") = true, py::arg("policy") = "lockstep", py::arg("threads") = 1, py::arg("eta") = 1.0,
           R"doc(PushSumGroup(xs, first_node=0, total_nodes=0, seed=0, feedback=True, policy="lockstep", threads=1, eta=1.0)

Nodes first_node .. first_node + len(xs) - 1 of a run of total_nodes (0: len(xs)), their x the
buffers xs (zero copy, one dtype and size). One round() runs every node's round: in lockstep it
gives the bits of PushSumNode rounds; with policy "overlap", "staleness:N" or "asynchronous[:W]"
(check_policy) a node mixes what its policy lets it (ALGORITHMS.md, "Asynchronous and overlapped
push-sum"); drain() then mixes everything in flight. threads: worker threads (results do not
depend on them).)doc")
      .def("round",
           [](py_group& self, std::uint32_t t, const py_schedule& s, const py_compressor& c, py::object network,
              std::optional<double> eta, py::object directions, double gamma, bool feedback, bool wait_all,
              bool fresh_residual) {
             busy_guard g(self.busy, "this PushSumGroup");
             std::vector<held_buffer> dirs;
             if (!directions.is_none()) {
               const py::sequence seq = directions;
               for (std::size_t i = 0; i < py::len(seq); ++i) dirs.push_back(take_buffer(seq[i], "directions[i]", false, self.xs.front().type));
             }
             std::visit(
                 [&](auto& grp) {
                   using G = std::remove_reference_t<decltype(*grp)>;
                   using T = typename G::value_type;
                   std::vector<std::span<const T>> views;
                   for (auto& h : dirs) views.push_back(h.span<T>());
                   typename G::step st;
                   st.eta = eta ? *eta : grp->options().eta;
                   st.direction_views = views;
                   st.gamma = gamma;
                   st.feedback = feedback;
                   st.wait_all = wait_all;
                   st.fresh_residual = fresh_residual;  // a direction count other than the nodes' is the group's size_error
                   const sp::wait_policy policy = grp->policy();
                   on_network(network, "PushSumGroup.round", &policy,
                              [&](auto& net) { grp->round(s.impl, c.impl, net, t, st); });
                 },
                 self.group);
           },
           py::arg("t"), py::arg("schedule"), py::arg("compressor"), py::arg("network"), py::arg("eta") = py::none(),
           py::arg("directions") = py::none(), py::arg("gamma") = 0.0, py::arg("feedback") = true, py::arg("wait_all") = false,
           py::arg("fresh_residual") = false,
           "round(t, schedule, compressor, network, eta=None, directions=None, gamma=0.0, feedback=True, wait_all=False, "
           "fresh_residual=False)\n\n"
           "Round t at every node of the group (PushSumNode.round's equations; eta None: the group's). directions: one "
           "buffer per node (read without a copy) or None. wait_all: a deferred round that still waits for every envelope "
           "of round t. Checks everything first; the GIL is released for the round.")
      .def(
          "drain",
          [](py_group& self, const py_schedule& s, py::object network) {
            busy_guard g(self.busy, "this PushSumGroup");
            std::visit([&](auto& grp) { on_network(network, "PushSumGroup.drain", nullptr, [&](auto& net) { grp->drain(s.impl, net); }); },
                       self.group);
          },
          py::arg("schedule"), py::arg("network"),
          "drain(schedule, network)\n\nMix every envelope in flight (collective over the ranks): afterwards sum x and "
          "sum u are exact, as after a lockstep round. A no-op in lockstep.")
      .def_property_readonly("num_nodes", [](py_group& self) { return std::visit([](auto& g) { return g->num_nodes(); }, self.group); })
      .def_property_readonly("first_node", [](py_group& self) { return std::visit([](auto& g) { return g->first_node(); }, self.group); })
      .def_property_readonly("policy", [](py_group& self) { return sp::to_string(self.policy()); })
      .def_property_readonly("max_staleness", [](py_group& self) { return std::visit([](auto& g) { return g->max_staleness(); }, self.group); },
                             "The largest staleness mixed so far (receiver's round - sender's round).")
      .def_property_readonly("common_round", [](py_group& self) { return std::visit([](auto& g) { return g->common_round(); }, self.group); },
                             "After a drain: the first round no node of the run has posted.")
      .def("weight", [](py_group& self, std::size_t i) { return std::visit([&](auto& g) { return g->u(i); }, self.group); },
           py::arg("i"), "u of local node i.")
      .def(
          "x",
          [](py::object o, std::size_t i) -> py::object {
            auto& self = o.cast<py_group&>();
            return std::visit([&](auto& g) -> py::object { return view_of(g->x(i), o); }, self.group);
          },
          py::arg("i"), "x of local node i: a flat numpy view of the caller's buffer.")
      .def(
          "debiased",
          [](py_group& self, std::size_t i, py::handle out) {
            busy_guard g(self.busy, "this PushSumGroup");
            held_buffer o = take_buffer(out, "out", true, self.xs.front().type);
            std::visit(
                [&](auto& grp) {
                  using T = typename std::remove_reference_t<decltype(*grp)>::value_type;
                  if (o.size != grp->dim())
                    throw sp::size_error("debiased: out has " + std::to_string(o.size) + " elements, the model has " +
                                         std::to_string(grp->dim()));
                  grp->debiased(i, o.span<T>());
                },
                self.group);
            return py::reinterpret_borrow<py::object>(out);
          },
          py::arg("i"), py::arg("out"), "debiased(i, out) -> out\n\nx_i / u_i of local node i into out (in place).");

  // --- data -----------------------------------------------------------------------------------------------
  m.def(
      "partition",
      [](py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast> labels, std::size_t n, double skew,
         std::uint64_t seed, double dirichlet) {
        const std::span<const std::uint8_t> l(labels.data(), static_cast<std::size_t>(labels.size()));
        sp::partition p;
        {
          py::gil_scoped_release nogil;
          p = dirichlet > 0.0 ? sp::partition_dirichlet(l, n, dirichlet, seed) : sp::partition_skewed(l, n, skew, seed);
        }
        py::list out;
        for (const auto& part : p) {
          py::array_t<std::uint32_t> a(static_cast<py::ssize_t>(part.size()));
          std::copy(part.begin(), part.end(), a.mutable_data());
          out.append(a);
        }
        return out;
      },
      py::arg("labels"), py::arg("n"), py::arg("skew") = 0.0, py::arg("seed") = 0, py::arg("dirichlet") = 0.0,
      R"doc(partition(labels, n, skew=0.0, seed=0, dirichlet=0.0) -> list of numpy uint32 arrays

The sample indices of each of n nodes, exactly as sparsepush-train deals them: skewed labels
(skew in [0, 1]: 0 is IID, 1 fully sorted by label; Hsieh et al.) or, with dirichlet > 0, a
Dirichlet(alpha) label partition. labels: one uint8 class per sample.)doc");
}
