// python/bind_group.cpp: PushSumGroup, several push-sum nodes driven by one thread (a rank's block
// over MPI), in lockstep or with a wait policy, over a LoopbackNetwork or an MpiNetwork.
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"

namespace sparsepush_python {
namespace {

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

std::unique_ptr<py_group> make_group(py::sequence xs, std::uint32_t first_node, std::size_t total_nodes, std::uint64_t seed,
                                     bool feedback, const std::string& policy, std::size_t threads, double eta) {
  auto p = std::make_unique<py_group>();
  if (py::len(xs) == 0) throw sp::config_error("a push-sum group needs at least one node");
  for (std::size_t i = 0; i < py::len(xs); ++i) {
    p->xs.push_back(take_buffer(xs[i], "xs[i]", true));
    if (p->xs.back().type != p->xs.front().type)
      throw py::value_error("sparsepush: xs[" + std::to_string(i) + "] is " + dtype_name(p->xs.back().type) + ", xs[0] " +
                            dtype_name(p->xs.front().type) + ": every node of a group has one dtype");
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
}

void group_round(py_group& self, std::uint32_t t, const py_schedule& s, const py_compressor& c, py::object network,
                 std::optional<double> eta, py::object directions, double gamma, bool feedback, bool wait_all,
                 bool fresh_residual) {
  busy_guard g(self.busy, "this PushSumGroup");
  std::vector<held_buffer> dirs;
  if (!directions.is_none()) {
    const py::sequence seq = directions;
    for (std::size_t i = 0; i < py::len(seq); ++i)
      dirs.push_back(take_buffer(seq[i], "directions[i]", false, self.xs.front().type));
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
        on_network(network, "PushSumGroup.round", &policy, [&](auto& net) { grp->round(s.impl, c.impl, net, t, st); });
      },
      self.group);
}

py::object group_debiased(py_group& self, std::size_t i, py::handle out) {
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
}

/// The group's properties and per-node accessors.
void bind_group_state(py::class_<py_group>& c) {
  c.def_property_readonly("num_nodes", [](py_group& self) { return std::visit([](auto& g) { return g->num_nodes(); }, self.group); })
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
      .def("debiased", &group_debiased, py::arg("i"), py::arg("out"),
           "debiased(i, out) -> out\n\nx_i / u_i of local node i into out (in place).");
}

}  // namespace

void bind_group(py::module_& m) {
  py::class_<py_group> c(m, "PushSumGroup",
                         "Several push-sum nodes driven by one thread (a rank's block over MPI), in lockstep or with a "
                         "wait policy: overlap, bounded staleness, asynchronous.");
  c.def(py::init(&make_group), py::arg("xs"), py::arg("first_node") = 0, py::arg("total_nodes") = 0, py::arg("seed") = 0,
        py::arg("feedback") = true, py::arg("policy") = "lockstep", py::arg("threads") = 1, py::arg("eta") = 1.0,
        R"doc(PushSumGroup(xs, first_node=0, total_nodes=0, seed=0, feedback=True, policy="lockstep", threads=1, eta=1.0)

Nodes first_node .. first_node + len(xs) - 1 of a run of total_nodes (0: len(xs)), their x the
buffers xs (zero copy, one dtype and size). One round() runs every node's round: in lockstep it
gives the bits of PushSumNode rounds; with policy "overlap", "staleness:N" or "asynchronous[:W]"
(check_policy) a node mixes what its policy lets it (docs/design/algorithms.md, "Asynchronous and overlapped
push-sum"); drain() then mixes everything in flight. threads: worker threads (results do not
depend on them).)doc")
      .def("round", &group_round,
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
          "sum u are exact, as after a lockstep round. A no-op in lockstep.");
  bind_group_state(c);
}

}  // namespace sparsepush_python
