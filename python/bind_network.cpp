// python/bind_network.cpp: the in-process network (LoopbackNetwork) and the endpoints every
// network hands its nodes (Endpoint).
#include <algorithm>
#include <chrono>
#include <string>

#include "bindings.hpp"

namespace sparsepush_python {
namespace {

py_loopback make_loopback(std::size_t n, bool encoded, double drop_probability, std::uint64_t seed, double timeout,
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
}

}  // namespace

namespace {
/// LoopbackNetwork's constructor's docstring, its default timeout the library's.
const char* loopback_doc() {
  static const std::string doc = "LoopbackNetwork(n, encoded=True, drop_probability=0.0, seed=0, timeout=" +
                                 py::repr(py::float_(sp::default_loopback_timeout.count())).cast<std::string>() +
                                 R"doc(, max_delay=0)

n node endpoints in one process. encoded=True: every envelope is encoded to its wire frame and
decoded (validated) at the receiver; False: copied. Both are safe for nodes on free-running
threads and give the same bits. drop_probability loses each non-self envelope with that
probability (keyed by seed). timeout: seconds a node waits for a missing envelope before it raises
TransportError. max_delay: the seeded delay model of deferred rounds (PushSumGroup with a policy
other than lockstep).)doc";
  return doc.c_str();
}
}  // namespace

void bind_network(py::module_& m) {
  py::class_<py_endpoint>(m, "Endpoint", "Node i's handle on a network (from network.endpoint(i)).")
      .def_property_readonly("node", [](const py_endpoint& e) { return e.node; }, "The node it belongs to.")
      .def("__repr__", [](const py_endpoint& e) { return "<sparsepush.Endpoint node=" + std::to_string(e.node) + ">"; });

  py::class_<py_loopback>(m, "LoopbackNetwork",
                          "n nodes in one process: each node's round runs on its own Python thread; envelopes go "
                          "through memory (encoded=True: encoded and decoded as over a real network).")
      .def(py::init(&make_loopback),
           py::arg("n"), py::arg("encoded") = true, py::arg("drop_probability") = 0.0, py::arg("seed") = 0,
           py::arg("timeout") = sp::default_loopback_timeout.count(), py::arg("max_delay") = 0, loopback_doc())
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
}

}  // namespace sparsepush_python
