// python/bind_node.cpp: PushSumNode, one push-sum node over the caller's buffer x (zero copy):
// its round, its de-biased model, its state and its checkpoints.
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"

namespace sparsepush_python {
namespace {

template <class T>
using node_t = sp::push_sum_node<std::span<T>>;

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

std::unique_ptr<py_node> make_node(py::handle x, std::uint32_t id, std::uint64_t seed, bool feedback) {
  auto p = std::make_unique<py_node>();
  p->x = take_buffer(x, "x", true);
  const sp::node_options o{id, seed, feedback, sp::loss_recovery::none};
  if (p->x.type == dtype::f32) p->node = std::make_unique<node_t<float>>(p->x.span<float>(), o);
  else p->node = std::make_unique<node_t<double>>(p->x.span<double>(), o);
  return p;
}

void node_round(py_node& self, std::uint32_t t, const py_schedule& s, const py_compressor& c, py_endpoint& ep, double eta,
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
        typename N::step st{eta, dir ? std::span<const T>(dir->span<T>()) : std::span<const T>(), gamma, feedback,
                            fresh_residual};
        py::gil_scoped_release nogil;
        std::visit([&](auto& e) { n->round(t, s.impl, c.impl, e, st); }, ep.impl);
      },
      self.node);
}

py::object node_debiased(py_node& self, py::handle out) {
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
}

py::object node_model(py_node& self) {
  busy_guard g(self.busy, self.who());
  return std::visit(
      [&](auto& n) -> py::object {
        using T = typename std::remove_reference_t<decltype(*n)>::value_type;
        py::array_t<T> a(static_cast<py::ssize_t>(n->dim()));
        n->debiased(std::span<T>(a.mutable_data(), n->dim()));
        return a;
      },
      self.node);
}

/// save (restore = false) or restore the node's state, the GIL released.
void node_file(py_node& self, const std::string& path, bool restore) {
  busy_guard g(self.busy, self.who());
  std::visit(
      [&](auto& n) {
        py::gil_scoped_release nogil;
        if (restore) node_restore(path, *n);
        else node_save(path, *n);
      },
      self.node);
}

std::string node_repr(py_node& self) {
  return std::visit(
      [&](auto& n) {
        return "<sparsepush.PushSumNode id=" + std::to_string(n->id()) + " dim=" + std::to_string(n->dim()) +
               " dtype=" + dtype_name(self.x.type) + " weight=" + std::to_string(n->u()) + ">";
      },
      self.node);
}

const char* const round_doc = R"doc(round(t, schedule, compressor, endpoint, eta=1.0, direction=None, gamma=0.0, feedback=True, fresh_residual=False)

One push-sum round t of this node (docs/design/algorithms.md, Sparse-Push steps 1-3), in lockstep:

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

/// The node's properties: weight, x, residual, id, dim, dtype, buffer.
void bind_node_state(py::class_<py_node>& c) {
  c.def_property_readonly(
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
      .def_property_readonly("buffer", [](py_node& self) { return self.x.owner; }, "The object x was taken from.");
}

}  // namespace

void bind_node(py::module_& m) {
  py::class_<py_node> c(m, "PushSumNode",
                        "One push-sum node over the caller's buffer x (zero copy): x is the push-sum numerator x_i, "
                        "updated in place by round(); weight is u_i; the model is x_i / u_i.");
  c.def(py::init(&make_node), py::arg("x"), py::arg("id"), py::arg("seed") = 0, py::arg("feedback") = true,
        R"doc(PushSumNode(x, id, seed=0, feedback=True)

Node `id` of a run, its numerator x_i being x itself: a C-contiguous float32/float64 numpy array
or torch CPU tensor (any shape, read as flat), taken without a copy and written in place by every
round (the node keeps x alive). u_i starts at 1. seed keys the compressors' random choices with
(node, round). feedback=True keeps an error-feedback residual e_i (starting at 0).
Raises ValueError for a buffer of the wrong kind, NonFiniteError for a NaN/Inf in x.)doc")
      .def("round", &node_round, py::arg("t"), py::arg("schedule"), py::arg("compressor"), py::arg("endpoint"),
           py::arg("eta") = 1.0, py::arg("direction") = py::none(), py::arg("gamma") = 0.0, py::arg("feedback") = true,
           py::arg("fresh_residual") = false, round_doc)
      .def("debiased", &node_debiased, py::arg("out"),
           "debiased(out) -> out\n\nWrite the de-biased model x_i / u_i into out (a buffer of the node's dtype and size, "
           "written in place, no copy) and return it.")
      .def("model", &node_model,
           "model() -> numpy.ndarray\n\nThe de-biased model x_i / u_i as a new flat array of the node's dtype.")
      .def(
          "save", [](py_node& self, const std::string& path) { node_file(self, path, false); }, py::arg("path"),
          "save(path)\n\nWrite the node's state (id, dim, u, x, e) to a checkpoint file, atomically (a crash leaves the "
          "old file or the new one). Call between rounds.")
      .def(
          "restore", [](py_node& self, const std::string& path) { node_file(self, path, true); }, py::arg("path"),
          "restore(path)\n\nRead a checkpoint written by save() into this node (x is written into the caller's buffer). "
          "The file is checked first (CRC, node id, dim, residual, finite values): on CheckpointError nothing changed.")
      .def("__repr__", &node_repr);
  bind_node_state(c);
}

}  // namespace sparsepush_python
