// python/bind_schedule.cpp: schedules (Schedule, parse_schedule, SCSP's final_rounds_for) and
// wait policies (check_policy, parse_policy: the policy names PushSumGroup and MpiNetwork take).
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "bindings.hpp"

namespace sparsepush_python {

sp::wait_policy parse_policy(const std::string& s) {
  auto number = [&](std::string_view v) {
    std::uint64_t x = 0;
    bool ok = !v.empty() && v.size() <= 10;
    for (const char c : v) ok = ok && c >= '0' && c <= '9', x = x * 10 + static_cast<std::uint64_t>(c - '0');
    if (!ok || x > std::numeric_limits<std::uint32_t>::max())
      throw sp::config_error("policy '" + s + "': '" + std::string(v) + "' is not a whole number");
    return static_cast<std::uint32_t>(x);
  };
  // the names are the library's (to_string of each rule): lockstep, overlap, asynchronous[:W], staleness:N
  const std::string lockstep = sp::to_string(sp::wait_policy{}), overlap = sp::to_string(sp::wait_policy::overlap()),
                    async = sp::to_string(sp::wait_policy::asynchronous()), bounded = sp::to_string(sp::wait_policy::staleness(1));
  const std::string async_prefix = async + ":", bounded_prefix = bounded.substr(0, bounded.find(':') + 1);
  if (s == lockstep) return sp::wait_policy{};
  if (s == overlap) return sp::wait_policy::overlap();
  if (s == async || s == "async" || s == "inf") return sp::wait_policy::asynchronous();
  if (s.rfind(async_prefix, 0) == 0) return sp::wait_policy::asynchronous(number(std::string_view(s).substr(async_prefix.size())));
  if (s.rfind(bounded_prefix, 0) == 0) return sp::wait_policy::staleness(number(std::string_view(s).substr(bounded_prefix.size())));
  if (!s.empty() && s.find_first_not_of("0123456789") == std::string::npos) return sp::wait_policy::staleness(number(s));
  throw sp::config_error("unknown wait policy '" + s +
                         "' (known: " + lockstep + ", " + overlap + ", " + bounded_prefix + "N, " + async + ", " + async_prefix + "W)");
}

namespace {

py::tuple final_rounds_for(const py_schedule& s, std::uint64_t first_round, double tolerance, std::uint32_t max_rounds,
                           double eta) {
  sp::final_rounds_plan p;
  {
    py::gil_scoped_release nogil;
    p = sp::final_rounds_for(s.impl, first_round, tolerance, max_rounds, eta);
  }
  return py::make_tuple(p.rounds, p.bound, p.exact);
}

}  // namespace

void bind_schedule(py::module_& m) {
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

  m.def(
      "check_policy", [](const std::string& spec) { return sp::to_string(parse_policy(spec)); }, py::arg("spec"),
      R"doc(check_policy(spec) -> str

The canonical name of a wait policy (docs/design/algorithms.md, "Asynchronous and overlapped push-sum"):
"lockstep" (wait for every envelope of round t), "overlap" (mix exactly round t-1's envelopes),
"staleness:N" (wait only for rounds <= t - N), "asynchronous[:W]" (never wait; W rounds of
envelopes held per in-neighbour, 16 by default). Also takes sparsepush-train's --staleness values
("0", "N", "inf"). Raises ConfigError for anything else.)doc");

  // the docstring's signature shows the library's search limit (kept alive with the module)
  static const std::string final_rounds_doc =
      "final_rounds_for(schedule, first_round, tolerance=1e-3, max_rounds=" + std::to_string(sp::final_rounds_search_limit) +
      ", eta=1.0) -> (rounds, bound, exact)\n\n" + R"doc(SCSP's automatic final-round count: the fewest exact push-sum rounds from first_round after which
every de-biased model is within `tolerance` of the largest distance to the average at their start
(bound: that relative distance; exact: the schedule averages exactly). ConfigError where the graph
mixes too slowly.)doc";
  m.def("final_rounds_for", &final_rounds_for, py::arg("schedule"), py::arg("first_round"), py::arg("tolerance") = 1e-3,
        py::arg("max_rounds") = sp::final_rounds_search_limit, py::arg("eta") = 1.0, final_rounds_doc.c_str());
}

}  // namespace sparsepush_python
