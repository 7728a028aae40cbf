// python/bind_run.cpp: GossipRun, the algorithm of a RunSpec over this process's nodes, stepped
// by a training loop of the caller's (C++ sparsepush::gossip_run: sparsepush.torch's
// GossipOptimizer drives it), over its own loopback, an MpiNetwork or an ExchangeNetwork: a
// network whose frames a Python function moves (torch.distributed's point-to-point, under
// torchrun). Both need the reference backend's RunSpec (SPARSEPUSH_PYTHON_TRAIN).
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"

#ifdef SPARSEPUSH_PYTHON_TRAIN
#include <sparsepush/train/gossip_run.hpp>
#include <sparsepush/transport/exchange.hpp>
#include <sparsepush/transport/loopback_node.hpp>

namespace sparsepush_python {
namespace {

/// An exchange_network whose frames the Python callable `exchange(round, sends, sources)` moves.
struct py_exchange {
  py::object fn;
  std::unique_ptr<sp::exchange_network> net;
};

std::unique_ptr<py_exchange> make_exchange(std::size_t n, std::uint32_t node, py::object fn) {
  if (!PyCallable_Check(fn.ptr())) throw py::type_error("sparsepush.ExchangeNetwork: exchange must be callable");
  auto p = std::make_unique<py_exchange>();
  p->fn = fn;
  PyObject* callable = fn.ptr();  // kept alive by p->fn, which lives as long as the network
  auto call = [callable, node](std::uint32_t round, std::span<const sp::outgoing_frame> sends,
                               std::span<const std::uint32_t> sources, std::vector<std::vector<std::byte>>& received) {
    py::gil_scoped_acquire gil;  // the round released it
    try {
      py::list out;
      for (const auto& f : sends)
        out.append(py::make_tuple(f.to, py::bytes(reinterpret_cast<const char*>(f.bytes.data()), f.bytes.size())));
      py::list from;
      for (const auto s : sources) from.append(s);
      const py::object got = py::reinterpret_borrow<py::object>(callable)(round, out, from);
      const py::sequence seq = got;
      received.resize(py::len(seq));
      for (std::size_t k = 0; k < received.size(); ++k) {
        const py::buffer b = py::reinterpret_borrow<py::buffer>(seq[k]);
        const py::buffer_info info = b.request();
        const auto* data = static_cast<const std::byte*>(info.ptr);
        received[k].assign(data, data + info.size * info.itemsize);
      }
    } catch (py::error_already_set& e) {
      throw sp::transport_error("round " + std::to_string(round) + ", node " + std::to_string(node) +
                                ": the exchange function failed: " + e.what());
    } catch (const py::cast_error& e) {
      throw sp::transport_error("round " + std::to_string(round) + ", node " + std::to_string(node) +
                                ": the exchange function must return one bytes-like frame per source: " + e.what());
    }
  };
  p->net = std::make_unique<sp::exchange_network>(n, node, call);
  return p;
}

template <class Net>
using run_t = sp::gossip_run<Net>;

struct py_run {
  std::unique_ptr<sp::loopback_node> view;  // a LoopbackNetwork's node (outlives the run)
  std::variant<std::unique_ptr<run_t<void>>, std::unique_ptr<run_t<sp::loopback_node>>,
#ifdef SPARSEPUSH_PYTHON_MPI
               std::unique_ptr<run_t<sp::mpi_network>>,
#endif
               std::unique_ptr<run_t<sp::exchange_network>>>
      run;
  py::object network;  // keeps the network alive
  std::mutex busy;

  /// The MPI network's thread check, where it runs over one.
  void check_thread([[maybe_unused]] const char* what) const {
#ifdef SPARSEPUSH_PYTHON_MPI
    if (!network.is_none() && py::isinstance<py_mpi>(network)) network.cast<const py_mpi&>().check_thread(what);
#endif
  }
  template <class F>
  decltype(auto) visit(F&& f) {
    return std::visit([&](auto& r) -> decltype(auto) { return f(*r); }, run);
  }
};

std::unique_ptr<py_run> make_run(const sp::run_spec& spec, py::sequence models, py::object network,
                                 std::vector<std::size_t> layer_offsets, std::optional<std::uint32_t> node) {
  std::vector<std::vector<float>> x0;
  for (std::size_t k = 0; k < py::len(models); ++k) {
    const held_buffer b = take_buffer(models[k], "models[k]", false, dtype::f32);
    const auto v = b.span<float>();
    x0.emplace_back(v.begin(), v.end());
  }
  auto p = std::make_unique<py_run>();
  p->network = network;
  if (network.is_none()) {
    py::gil_scoped_release nogil;
    p->run = std::make_unique<run_t<void>>(spec, std::move(x0), std::move(layer_offsets));
    return p;
  }
  if (py::isinstance<py_loopback>(network)) {  // one node of a loopback that threads share
    if (!node) throw sp::config_error("GossipRun over a LoopbackNetwork runs one of its nodes: give node=");
    p->view = std::make_unique<sp::loopback_node>(*network.cast<py_loopback&>().net, *node);
    p->run = std::make_unique<run_t<sp::loopback_node>>(spec, std::move(x0), std::move(layer_offsets), p->view.get());
    return p;
  }
  if (node) throw sp::config_error("GossipRun: node= is for a LoopbackNetwork (the other networks place the nodes)");
#ifdef SPARSEPUSH_PYTHON_MPI
  if (py::isinstance<py_mpi>(network)) {
    auto& m = network.cast<py_mpi&>();
    m.check_thread("GossipRun()");
    p->run = std::make_unique<run_t<sp::mpi_network>>(spec, std::move(x0), std::move(layer_offsets), m.net.get());
    return p;
  }
#endif
  if (py::isinstance<py_exchange>(network)) {
    auto& e = network.cast<py_exchange&>();
    p->run = std::make_unique<run_t<sp::exchange_network>>(spec, std::move(x0), std::move(layer_offsets), e.net.get());
    return p;
  }
  throw py::type_error("sparsepush.GossipRun: network must be None (every node in this process), a LoopbackNetwork "
                       "(with node=), an MpiNetwork or an ExchangeNetwork");
}

/// The caller's model buffers as spans (float32, C-contiguous, writable; held while in use).
std::vector<held_buffer> take_models(py::sequence models, const char* what = "models[k]") {
  std::vector<held_buffer> held;
  for (std::size_t k = 0; k < py::len(models); ++k) held.push_back(take_buffer(models[k], what, true, dtype::f32));
  return held;
}
std::vector<std::span<float>> spans_of(const std::vector<held_buffer>& held) {
  std::vector<std::span<float>> v;
  for (const auto& h : held) v.push_back(h.span<float>());
  return v;
}

py::bytes run_save(py_run& self) {
  busy_guard g(self.busy, "this GossipRun");
  self.check_thread("GossipRun.save");
  std::vector<std::byte> bytes;
  {
    py::gil_scoped_release nogil;
    sp::checkpoint_writer w;
    self.visit([&](auto& r) { r.save(w); });
    bytes = w.finish();
  }
  return py::bytes(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

void run_restore(py_run& self, py::bytes state) {
  busy_guard g(self.busy, "this GossipRun");
  const std::string_view text = state;
  const std::vector<std::byte> bytes(reinterpret_cast<const std::byte*>(text.data()),
                                     reinterpret_cast<const std::byte*>(text.data() + text.size()));
  py::gil_scoped_release nogil;
  sp::checkpoint_reader r(bytes, "the GossipRun state");
  self.visit([&](auto& run) { run.restore(r); });
  r.done();
}

template <class Get>
auto run_property(Get get) {
  return [get](py_run& self) { return self.visit([&](auto& r) { return get(r); }); };
}

void bind_exchange(py::module_& m) {
  py::class_<py_exchange>(m, "ExchangeNetwork",
                          "A network of one node per process whose frames a Python function moves (torch.distributed "
                          "under torchrun: sparsepush.torch).")
      .def(py::init(&make_exchange), py::arg("n"), py::arg("node"), py::arg("exchange"),
           R"doc(ExchangeNetwork(n, node, exchange)

Node `node` of a run of n nodes, in this process. In every round the node's GossipRun calls
exchange(round, sends, sources) once, from the thread that steps it: sends is a list of
(to, frame bytes) to deliver to node `to`; it returns one bytes-like frame from each node of
`sources` (a list of ints), in that order. The frames are checked (sender, round, format):
TransportError or DecodeError otherwise; an exception of the function is a TransportError naming
the round and the node. Lockstep rounds only, no injected message loss.)doc")
      .def_property_readonly("num_nodes", [](const py_exchange& e) { return e.net->num_nodes(); })
      .def_property_readonly("node", [](const py_exchange& e) { return e.net->first_node(); })
      .def("total_bytes", [](const py_exchange& e) { return e.net->total_bytes(); }, "Bytes this node has sent.")
      .def("total_messages", [](const py_exchange& e) { return e.net->total_messages(); }, "Envelopes this node has sent.");
}

void bind_gossip_run(py::module_& m) {
  py::class_<py_run>(m, "GossipRun",
                     "The algorithm of a RunSpec over this process's nodes, stepped by a training loop of the caller's "
                     "(C++ sparsepush::gossip_run). sparsepush.torch.GossipOptimizer drives it.")
      .def(py::init(&make_run), py::arg("spec"), py::arg("models"), py::arg("network") = py::none(),
           py::arg("layer_offsets") = std::vector<std::size_t>{}, py::arg("node") = py::none(),
           R"doc(GossipRun(spec, models, network=None, layer_offsets=(), node=None)

spec: a validated RunSpec (its algorithm, schedule, compressor, eta, SCSP's final rounds, policy,
loss, seed, threads: the gossip settings). models: the initial model of each node this process
runs (float32 buffers of one size, copied): every node of the run (len(models) == spec nodes;
centralized: every node too) when network is None; node `node`'s of a LoopbackNetwork (copied or
encoded) that threads share, each thread stepping its own GossipRun in lockstep rounds; else the
MpiNetwork's or ExchangeNetwork's nodes here. layer_offsets: where each layer starts in the flat
model (per_layer top-K).)doc")
      .def(
          "step",
          [](py_run& self, py::sequence models) {
            busy_guard g(self.busy, "this GossipRun");
            self.check_thread("GossipRun.step");
            const auto held = take_models(models);
            const auto spans = spans_of(held);
            py::gil_scoped_release nogil;
            self.visit([&](auto& r) { r.step(spans); });
          },
          py::arg("models"),
          R"doc(step(models)

One round at every node here. models[k] (float32, written in place) holds node first_node + k's
de-biased model after its optimizer's step; the change is the local direction (p = xh - model,
x <- x - p), then the round compresses, pushes and mixes, and models[k] gets the new de-biased
model x / u. Checked first (sizes, NaN/Inf): on an error nothing changed. The GIL is released.)doc")
      .def(
          "track",
          [](py_run& self, py::sequence grads) {
            busy_guard g(self.busy, "this GossipRun");
            const auto held = take_models(grads, "grads[k]");
            const auto spans = spans_of(held);
            py::gil_scoped_release nogil;
            self.visit([&](auto& r) { r.track(spans); });
          },
          py::arg("grads"),
          R"doc(track(grads)

Gradient tracking (spec tracking=True), before the optimizer's step of this round: grads[k]
(float32, written in place) holds node first_node + k's gradient at its model; it gets the
tracker y + g(t) - g(t-1), which the optimizer steps along in place of the gradient. step() then
also mixes the trackers (a second message per link). Checked first (sizes, NaN/Inf): on an error
nothing changed. A run that does not track refuses it; one that does refuses a step() whose
round had no track(). The GIL is released.)doc")
      .def(
          "finish",
          [](py_run& self, py::sequence models) {
            busy_guard g(self.busy, "this GossipRun");
            self.check_thread("GossipRun.finish");
            const auto held = take_models(models);
            const auto spans = spans_of(held);
            py::gil_scoped_release nogil;
            return self.visit([&](auto& r) { return r.finish(spans); });
          },
          py::arg("models"),
          "finish(models) -> int\n\nSCSP's final rounds (no local step), then every envelope in flight mixed; the final "
          "models into models. Collective over the processes. Returns the final rounds run (0 but for SCSP).")
      .def(
          "write_models",
          [](py_run& self, py::sequence models) {
            busy_guard g(self.busy, "this GossipRun");
            const auto held = take_models(models);
            const auto spans = spans_of(held);
            py::gil_scoped_release nogil;
            self.visit([&](auto& r) { r.write_models(spans); });
          },
          py::arg("models"), "write_models(models)\n\nThe de-biased models x / u into models (in place).")
      .def("save", &run_save,
           "save() -> bytes\n\nThe run's state (round, x, u, e, the policy's expectations, the byte ledger), checked on "
           "restore. Under a waiting policy other than lockstep it first mixes what is in flight (collective).")
      .def("restore", &run_restore, py::arg("state"),
           "restore(state)\n\nRestore what save() wrote (the same settings and model size): CheckpointError otherwise, "
           "and nothing changed. Then write_models() gives the restored models.")
      .def(
          "weight", [](py_run& self, std::size_t k) { return self.visit([&](auto& r) { return r.weight(k); }); },
          py::arg("k"), "weight(k) -> float\n\nThe push-sum weight u of local node k (1 where the algorithm keeps none).")
      .def(
          "node_bytes_sent", [](py_run& self, std::size_t k) { return self.visit([&](auto& r) { return r.bytes_sent(k); }); },
          py::arg("k"), "node_bytes_sent(k) -> int\n\nBytes local node k has sent.")
      .def(
          "node_state_bytes",
          [](py_run& self, std::size_t k) { return self.visit([&](auto& r) { return r.state_bytes(k); }); },
          py::arg("k"),
          "node_state_bytes(k) -> int\n\nBytes of state local node k keeps beside the caller's model (the algorithm's "
          "numerator, residuals or references, trackers, and the run's scratch copy).")
      .def(
          "node_messages_sent",
          [](py_run& self, std::size_t k) { return self.visit([&](auto& r) { return r.messages_sent(k); }); },
          py::arg("k"), "node_messages_sent(k) -> int\n\nEnvelopes local node k has sent.")
      .def_property_readonly("round", run_property([](auto& r) { return r.round(); }), "The next round.")
      .def_property_readonly("finished", run_property([](auto& r) { return r.finished(); }))
      .def_property_readonly("final_rounds", run_property([](auto& r) { return r.final_rounds(); }),
                             "SCSP's final rounds finish() ran.")
      .def_property_readonly("local_nodes", run_property([](auto& r) { return r.local_nodes(); }))
      .def_property_readonly("first_node", run_property([](auto& r) { return r.first_node(); }))
      .def_property_readonly("dim", run_property([](auto& r) { return r.dim(); }))
      .def_property_readonly("bytes_sent", run_property([](auto& r) { return r.bytes_sent(); }),
                             "Bytes sent by this process's nodes (envelope headers included).")
      .def_property_readonly("messages_sent", run_property([](auto& r) { return r.messages_sent(); }))
      .def_property_readonly("messages_dropped", run_property([](auto& r) { return r.messages_dropped(); }))
      .def_property_readonly("max_staleness", run_property([](auto& r) { return r.max_staleness(); }));
}

}  // namespace

void bind_run(py::module_& m) {
  bind_exchange(m);
  bind_gossip_run(m);
}

}  // namespace sparsepush_python

#else

namespace sparsepush_python {
void bind_run(py::module_& m) {
  refuse_without_train(m, "GossipRun");
  refuse_without_train(m, "ExchangeNetwork");
}
}  // namespace sparsepush_python

#endif
