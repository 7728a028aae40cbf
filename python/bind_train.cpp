// python/bind_train.cpp: a training run from Python. RunSpec is the library's run_spec (every
// setting of sparsepush-train, its keywords the CLI's long options with '_' for '-'); train() runs
// it with the reference backend exactly as sparsepush-train does (validate, prepare_run: files
// checked, data loaded, model made, run planned; run_reference) and returns the --summary JSON as
// a dict; run_options() lists the settings from the same table; RunSpec.fingerprint is the text
// checkpoints and MPI ranks compare; RunPlan and RunSpec.lr give a Python training loop
// (examples/python/train_torch.py) the shards, round counts and learning rates of the CLI. It
// needs the reference backend (Eigen 3 and zlib: SPARSEPUSH_PYTHON_TRAIN); without it, stand-ins
// raise ConfigError saying so.
#include <cmath>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "bindings.hpp"

#ifdef SPARSEPUSH_PYTHON_TRAIN
#include <sparsepush/train/prepare_run.hpp>
#include <sparsepush/train/reference_run.hpp>
#include <sparsepush/train/run_spec.hpp>

namespace sparsepush_python {
namespace {

using namespace pybind11::literals;

// --- values: summary_value and run_spec fields as Python objects --------------------------------

/// A run_spec of defaults.
const sp::run_spec& defaults() {
  static const sp::run_spec d;
  return d;
}

/// A summary as Python values: null -> None, integers -> int, a double -> float (a non-finite one
/// -> None, as nlohmann writes it in sparsepush-train's JSON), arrays -> list, objects -> dict.
py::object to_python(const sp::summary_value& v) {
  return std::visit(
      [](const auto& x) -> py::object {
        using X = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<X, std::nullptr_t>) {
          return py::none();
        } else if constexpr (std::is_same_v<X, double>) {
          return std::isfinite(x) ? py::object(py::float_(x)) : py::object(py::none());
        } else if constexpr (std::is_same_v<X, sp::summary_value::array>) {
          py::list a;
          for (const auto& e : x) a.append(to_python(e));
          return a;
        } else if constexpr (std::is_same_v<X, sp::summary_value::object>) {
          py::dict o;
          for (const auto& [k, e] : x) o[py::str(k)] = to_python(e);
          return o;
        } else {
          return py::cast(x);  // bool, int64, uint64, string
        }
      },
      v.get());
}

/// A field's value as Python holds it: an empty optional is None.
template <class M>
py::object value_of(const M& member) {
  if constexpr (requires { member.has_value(); }) return member ? py::cast(*member) : py::object(py::none());
  else return py::cast(member);
}

template <class M>
struct field_type {
  using type = M;
};
template <class M>
struct field_type<std::optional<M>> {
  using type = M;
};

/// "bool", "int", "float", "str" or "list" (of str: a repeatable option).
template <class M>
const char* type_name() {
  using T = typename field_type<M>::type;
  if constexpr (std::is_same_v<T, bool>) return "bool";
  else if constexpr (std::is_integral_v<T>) return "int";
  else if constexpr (std::is_floating_point_v<T>) return "float";
  else if constexpr (std::is_same_v<T, std::string>) return "str";
  else return "list";
}

/// The default as sparsepush-train --help prints it (None where it prints none).
template <class M>
py::object default_text(const sp::field_info& f, const M& member) {
  if constexpr (std::is_same_v<M, std::string>) return py::str(member);
  else if constexpr (std::is_same_v<M, double>) return py::str(sp::run_settings::exact(member));
  else if constexpr (std::is_integral_v<M> && !std::is_same_v<M, bool>) return py::str(std::to_string(member));
  else if (!f.shown_default.empty()) return py::str(std::string(f.shown_default));
  else return py::none();
}

const char* role_name(sp::field_role r) {
  return r == sp::field_role::numbers ? "numbers" : r == sp::field_role::ranks ? "ranks" : "local";
}

// --- keywords -> fields ---------------------------------------------------------------------------

/// A Python value as the text run_spec::set parses (a bool "true"/"false", an int its digits, a
/// float its repr(): the shortest text of the same bits); TypeError for anything else.
std::string text_of(py::handle v, const std::string& key, const char* who) {
  PyObject* o = v.ptr();
  const auto obj = py::reinterpret_borrow<py::object>(v);
  if (PyBool_Check(o)) return o == Py_True ? "true" : "false";
  if (PyUnicode_Check(o)) return v.cast<std::string>();
  if (PyIndex_Check(o)) return py::str(py::int_(obj)).cast<std::string>();  // int, numpy integers
  if (PyFloat_Check(o) || py::hasattr(v, "__float__")) return py::repr(py::float_(obj)).cast<std::string>();
  throw py::type_error(std::string(who) + ": " + key + "= takes a bool, int, float or str, got " +
                       py::str(py::type::handle_of(v).attr("__name__")).cast<std::string>());
}

/// TypeError naming an unknown keyword, with the closest known one.
[[noreturn]] void unknown_keyword(const std::string& key, const char* who) {
  py::list known;
  sp::run_spec::for_each_field(defaults(), [&](const sp::field_info& f, const auto&) { known.append(f.keyword()); });
  const py::list close = py::module_::import("difflib").attr("get_close_matches")(key, known, 1);
  throw py::type_error(std::string(who) + " got an unexpected keyword argument '" + key + "'" +
                       (close.empty() ? std::string(" (sparsepush.run_options() lists them)")
                                      : " (did you mean '" + close[0].cast<std::string>() + "'?)"));
}

/// Set the field of keyword `key` from a Python value (None: its default; a list or tuple of str
/// for a repeatable field). A bad text is the library's config_error, naming the option.
void set_keyword(sp::run_spec& s, const std::string& key, py::handle v, const char* who) {
  bool found = false;
  sp::run_spec::for_each_field(s, [&](const sp::field_info& f, auto& member) {
    using M = std::decay_t<decltype(member)>;
    if (found || f.keyword() != key) return;
    found = true;
    if (v.is_none()) {  // the default: the member of a default run_spec
      sp::run_spec::for_each_field(defaults(), [&](const sp::field_info& g, const auto& d) {
        if constexpr (std::is_same_v<std::decay_t<decltype(d)>, M>)
          if (g.option == f.option) member = d;
      });
      return;
    }
    const bool many = py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v);
    if constexpr (std::is_same_v<M, std::vector<std::string>>) {
      member.clear();
      if (!many) return s.set(f.option, text_of(v, key, who));
      for (const auto& e : v) s.set(f.option, text_of(e, key, who));
    } else {
      if (many) throw py::type_error(std::string(who) + ": " + key + "= takes one value, got a sequence");
      s.set(f.option, text_of(v, key, who));
    }
  });
  if (!found) unknown_keyword(key, who);
}

void set_keywords(sp::run_spec& s, const py::kwargs& kw, const char* who) {
  for (const auto& [k, v] : kw) set_keyword(s, py::str(k).cast<std::string>(), v, who);
}

// --- RunSpec ------------------------------------------------------------------------------------

py::dict spec_dict(const sp::run_spec& s) {
  py::dict d;
  sp::run_spec::for_each_field(s, [&](const sp::field_info& f, const auto& member) { d[py::str(f.keyword())] = value_of(member); });
  return d;
}

py::object spec_item(const sp::run_spec& s, const std::string& key) {
  py::object out;
  sp::run_spec::for_each_field(s, [&](const sp::field_info& f, const auto& member) {
    if (f.keyword() == key) out = value_of(member);
  });
  if (!out) throw py::key_error("RunSpec has no setting '" + key + "' (sparsepush.run_options() lists them)");
  return out;
}

/// sparsepush.RunSpec(nodes=4, model='mlp'): the settings that differ from the defaults.
std::string spec_repr(const sp::run_spec& s) {
  const py::dict mine = spec_dict(s), base = spec_dict(defaults());
  std::string out;
  for (const auto& [k, v] : mine)
    if (!v.equal(base[k])) out += (out.empty() ? "" : ", ") + k.cast<std::string>() + "=" + py::repr(v).cast<std::string>();
  return "sparsepush.RunSpec(" + out + ")";
}

py::dict algorithm_dict(const sp::algorithm_info& a) {
  return py::dict("name"_a = std::string(a.name), "graph"_a = a.graph, "symmetric"_a = a.symmetric,
                  "compresses"_a = a.compresses, "keeps_neighbour_copies"_a = a.keeps_neighbour_copies,
                  "consensus_step"_a = a.consensus_step, "per_layer"_a = a.per_layer, "final_rounds"_a = a.final_rounds,
                  "inprocess_only"_a = a.inprocess_only);
}

/// A plan and whether its final-round bound holds (SCSP, --final-rounds auto, no message loss):
/// the summary's final_rounds_bound is null otherwise.
struct py_plan {
  sp::reference_plan p;
  bool bounded = false;
};

py_plan spec_plan(const sp::run_spec& s, py::array_t<std::uint8_t, py::array::c_style | py::array::forcecast> labels) {
  s.validate();
  sp::labelled_images train;
  train.count = static_cast<std::uint32_t>(labels.size());
  train.labels.assign(labels.data(), labels.data() + labels.size());
  py_plan out;
  {
    py::gil_scoped_release nogil;
    out.p = sp::plan_reference_run(s, train);
  }
  out.bounded = s.info().final_rounds && s.final_rounds_auto() && s.drop_value() == 0;
  return out;
}

/// RunSpec's read-only views of the values a run uses (the defaults that depend on other fields
/// resolved), named as the C++ accessors.
void bind_spec_values(py::class_<sp::run_spec>& c) {
  c.def_property_readonly("schedule_spec", &sp::run_spec::schedule_spec)
      .def_property_readonly("compressor_spec", &sp::run_spec::compressor_spec)
      .def_property_readonly("eta_value", &sp::run_spec::eta_value)
      .def_property_readonly("final_rounds_spec", &sp::run_spec::final_rounds_spec)
      .def_property_readonly("final_compressor_spec", &sp::run_spec::final_compressor_spec)
      .def_property_readonly("final_eta_value", &sp::run_spec::final_eta_value, "None for algorithms without final rounds.")
      .def_property_readonly("final_tolerance_value", &sp::run_spec::final_tolerance_value)
      .def_property_readonly("skew_value", &sp::run_spec::skew_value)
      .def_property_readonly("dirichlet_value", &sp::run_spec::dirichlet_value)
      .def_property_readonly("consensus_step_value", &sp::run_spec::consensus_step_value)
      .def_property_readonly("drop_value", &sp::run_spec::drop_value)
      .def_property_readonly("loss_recovery_value", &sp::run_spec::loss_recovery_value)
      .def_property_readonly("eval_reduce_value", &sp::run_spec::eval_reduce_value)
      .def_property_readonly("bits_value", &sp::run_spec::bits_value, "0: full precision.")
      .def_property_readonly("policy", [](const sp::run_spec& s) { return sp::to_string(s.policy()); },
                             "The wait policy's name (check_policy).")
      .def_property_readonly("lockstep", [](const sp::run_spec& s) { return s.policy().lockstep(); },
                             "Whether the rounds are lockstep (the policy's own answer, not its name).")
      .def_property_readonly("mpi", &sp::run_spec::mpi, "Whether the run is over MPI (transport mpi).")
      .def_property_readonly("max_delay_value", &sp::run_spec::max_delay_value)
      .def_property_readonly("threads_value", &sp::run_spec::threads_value)
      .def_property_readonly("algorithm_info", [](const sp::run_spec& s) { return algorithm_dict(s.info()); },
                             "What the algorithm is, as the rules ask it (a dict of algorithm_info's fields).");
}

void bind_spec(py::module_& m) {
  py::class_<sp::run_spec> c(m, "RunSpec",
                             "A training run as one value (C++ sparsepush::run_spec): every setting of sparsepush-train, "
                             "its keyword the long option with '_' for '-'.");
  c.def(py::init([](py::kwargs kw) {
          sp::run_spec s;
          set_keywords(s, kw, "RunSpec()");
          return s;
        }),
        R"doc(RunSpec(**options)

The settings of a run, each keyword a long option of sparsepush-train with '_' for '-'
(run_options() lists them): RunSpec(nodes=4, model="mlp", epochs=0.05). A value is given as the
command line gives it: a bool, an int, a float (its repr(), the same bits), a str, or for the
repeatable straggler a list of str; None is the default. The text is parsed as the command line's
(ConfigError naming the option); the rules are validate()'s. spec["eta"] is what was given (None:
the default); spec.eta_value what the run uses.)doc")
      .def("set", [](sp::run_spec& s, py::kwargs kw) { set_keywords(s, kw, "RunSpec.set()"); },
           "set(**options)\n\nChange settings, as RunSpec(**options) takes them.")
      .def("__getitem__", &spec_item, py::arg("keyword"))
      .def("as_dict", &spec_dict, "as_dict() -> dict\n\nEvery setting by keyword (None: not given, its default).")
      .def("__repr__", &spec_repr)
      .def("__copy__", [](const sp::run_spec& s) { return s; })
      .def("validate", &sp::run_spec::validate, py::arg("ranks") = 1,
           "validate(ranks=1) -> list of str\n\nEvery rule of sparsepush-train's options for a run over `ranks` MPI "
           "processes: ConfigError naming the option; returns the warnings (settings given that change nothing).")
      .def("check_files", [](const sp::run_spec& s, int rank) { s.check_files(rank, sp::fashion_mnist_files()); },
           py::arg("rank") = 0,
           "check_files(rank=0)\n\nThe checks of the files a run touches, on this rank (rank 0 checks them): the "
           "outputs (summary, log, plot) can be written, none named twice nor as an input; ConfigError otherwise. "
           "Nothing is created.")
      .def("lr", [](const sp::run_spec& s, std::uint32_t t, std::uint32_t train_rounds) { return sp::reference_lr(s).at(t, train_rounds); },
           py::arg("t"), py::arg("train_rounds"),
           "lr(t, train_rounds) -> float\n\nThe learning rate of round t of train_rounds (lr, lr_schedule, warmup).")
      .def(
          "fingerprint",
          [](const sp::run_spec& s, std::size_t dim, bool every_rank) { return s.fingerprint(dim, every_rank).text(); },
          py::arg("dim"), py::arg("every_rank") = false,
          "fingerprint(dim, every_rank=False) -> str\n\nThe settings text a checkpoint (and a GossipOptimizer's "
          "state_dict) is written with and resumed under, for a model of dim parameters: every number the run computes "
          "with, as it uses them (local settings such as threads and the outputs left out). every_rank: also the "
          "settings every MPI rank of one run must share (what the ranks compare).")
      .def("plan", &spec_plan, py::arg("labels"),
           "plan(labels) -> RunPlan\n\nThe run's shards and round counts on a training set of these labels (uint8, "
           "one per sample), as sparsepush-train plans them; validates first.");
  bind_spec_values(c);
}

void bind_plan(py::module_& m) {
  py::class_<py_plan>(m, "RunPlan", "What a run is made of once its data is known (RunSpec.plan).")
      .def_property_readonly(
          "parts",
          [](const py_plan& p) {
            py::list out;
            for (const auto& part : p.p.parts) out.append(copy_of(std::span<const std::uint32_t>(part)));
            return out;
          },
          "Each node's sample indices (a list of numpy uint32 arrays).")
      .def_property_readonly("per_node", [](const py_plan& p) { return p.p.per_node; }, "Training images per node.")
      .def_property_readonly("train_rounds", [](const py_plan& p) { return p.p.train_rounds; })
      .def_property_readonly("final_rounds", [](const py_plan& p) { return p.p.final_rounds; }, "SCSP's; 0 otherwise.")
      .def_property_readonly("rounds", [](const py_plan& p) { return p.p.rounds(); })
      .def_property_readonly(
          "final_rounds_bound", [](const py_plan& p) { return p.bounded ? py::object(py::float_(p.p.plan.bound)) : py::none(); },
          "SCSP with final_rounds 'auto' and no message loss: every model's distance to the average after the final "
          "rounds, relative to the largest at their start; None otherwise.")
      .def_property_readonly("final_rounds_exact", [](const py_plan& p) { return p.p.plan.exact; },
                             "Whether the schedule averages exactly in the final rounds.");
}

// --- train --------------------------------------------------------------------------------------

void warn(PyObject* category, const std::string& text) {
  if (PyErr_WarnEx(category, text.c_str(), 1) < 0) throw py::error_already_set();
}

/// The front end of a run from Python: progress to sys.stdout when verbose, error lines kept for
/// warnings, the summary's JSON text from Python's json module (keys sorted, as sparsepush-train
/// writes them).
sp::reference_io python_io(bool verbose, std::vector<std::string>& errors, std::mutex& mu) {
  sp::reference_io io;
  if (verbose)
    io.out = [](const std::string& t) {
      py::gil_scoped_acquire gil;
      try {
        const py::object out = py::module_::import("sys").attr("stdout");
        out.attr("write")(t);
        out.attr("flush")();
      } catch (py::error_already_set& e) {
        e.discard_as_unraisable("sparsepush.train: writing progress");
      }
    };
  io.err = [&errors, &mu](const std::string& t) {
    const std::lock_guard<std::mutex> lock(mu);
    errors.push_back(t);
  };
  io.json = [](const sp::summary_value& v) {
    py::gil_scoped_acquire gil;
    return py::module_::import("json")
        .attr("dumps")(to_python(v), "indent"_a = 2, "sort_keys"_a = true, "ensure_ascii"_a = false)
        .cast<std::string>();
  };
  return io;
}

py::object run_spec_training(const sp::run_spec& spec, bool verbose) {
  if (spec.mpi())
    throw sp::config_error("--transport mpi: sparsepush.train() runs every node in this process (transport "
                           "'inprocess'); over MPI run sparsepush-train --transport mpi under mpirun, or drive "
                           "MpiNetwork and PushSumGroup from Python");
  const auto start = sp::run_clock::now();
  for (const auto& w : spec.validate(1)) warn(PyExc_UserWarning, w);
  std::vector<std::string> errors;
  std::mutex mu;
  const sp::reference_io io = python_io(verbose, errors, mu);
  sp::reference_outcome outcome;
  {
    py::gil_scoped_release nogil;  // checking the files, loading, planning and training
    const sp::prepared_run run = sp::prepare_run(spec);
    sp::single_process group(spec.nodes);
    outcome = sp::run_reference<sp::single_process, void>(spec, run.plan, *run.data, run.model, group, nullptr, io, start);
  }
  const auto& r = outcome.result;
  for (const auto& e : errors)
    if (!(r.diverged && e == r.reason)) warn(PyExc_RuntimeWarning, e);
  if (r.diverged) {
    PyErr_SetString(diverged_error_type(), r.reason.c_str());
    throw py::error_already_set();
  }
  for (const auto& e : outcome.failed_outputs) warn(PyExc_RuntimeWarning, e);
  return to_python(outcome.summary);
}

py::object train(py::args args, py::kwargs kwargs) {
  sp::run_spec spec;
  if (args.size() > 1) throw py::type_error("train() takes at most one positional argument (a RunSpec)");
  if (args.size() == 1) {
    if (!py::isinstance<sp::run_spec>(args[0])) throw py::type_error("train(): the positional argument must be a RunSpec");
    spec = args[0].cast<const sp::run_spec&>();
  }
  bool verbose = false;
  for (const auto& [k, v] : kwargs) {
    const std::string key = py::str(k).cast<std::string>();
    if (key != "verbose") set_keyword(spec, key, v, "train()");
    else if (PyBool_Check(v.ptr())) verbose = v.ptr() == Py_True;
    else throw py::type_error("train(): verbose= takes a bool");
  }
  return run_spec_training(spec, verbose);
}

py::dict run_options() {
  py::dict out;
  sp::run_spec::for_each_field(defaults(), [&](const sp::field_info& f, const auto& member) {
    using M = std::decay_t<decltype(member)>;
    py::object choices = py::none();
    if (!f.choices.empty()) choices = py::str(std::string(f.choices)).attr("split")(",");
    out[py::str(f.keyword())] =
        py::dict("option"_a = "--" + std::string(f.option), "help"_a = std::string(f.help), "type"_a = type_name<M>(),
                 "default"_a = value_of(member), "default_text"_a = default_text(f, member), "choices"_a = choices,
                 "role"_a = role_name(f.role), "gossip"_a = f.gossip);
  });
  return out;
}

const char* const train_doc = R"doc(train(spec=None, *, verbose=False, **options) -> dict

Train as sparsepush-train does, in this process: every node on its own shard of Fashion-MNIST
with the reference backend. options are RunSpec's (the command line's long options with '_' for
'-'), applied over spec when one is given:

    sparsepush.train(nodes=4, model="mlp", epochs=0.05, eval_samples=200, final_rounds=3, threads=1)

The run is validated first (ConfigError naming the option; TypeError for an unknown keyword;
warnings.warn for a setting that changes nothing), its output files checked, the data loaded and
the run planned; the GIL is released while it loads and trains. Returns the summary: a dict with
the keys and values of sparsepush-train's --summary JSON for the same options (ints as int,
doubles as float with the same bits, null and non-finite numbers as None). summary="run.json"
writes that JSON too (and log=, plot=, checkpoint=, resume= work as on the command line).
verbose=True prints the progress lines and the summary to sys.stdout. A run that diverges raises
DivergedError naming the round and what to lower; an output file that could not be written is a
RuntimeWarning (the summary is still returned). transport "mpi" is refused: run sparsepush-train
under mpirun for that.)doc";

}  // namespace

void bind_train(py::module_& m) {
  bind_spec(m);
  bind_plan(m);
  m.def("train", &train, train_doc);
  m.def(
      "settings_diff",
      [](const std::string& was, const std::string& now) {
        return sp::run_settings::parse(now).diff_from(sp::run_settings::parse(was));
      },
      py::arg("was"), py::arg("now"),
      "settings_diff(was, now) -> str\n\nThe settings of two fingerprints (RunSpec.fingerprint) that differ, as "
      "\"key=old (now new), ...\"; \"\" when they are the same.");
  m.def("run_options", &run_options,
        R"doc(run_options() -> dict

Every setting of a run by keyword (RunSpec, train()), in sparsepush-train's order: {"option":
"--eval-samples", "help": ..., "type": "int" | "float" | "bool" | "str" | "list", "default": the
value (None: a default that depends on other settings, said in the help), "default_text": what
--help prints, "choices": list or None, "role": "numbers" (a checkpoint resumes with it), "ranks"
(every MPI rank shares it) or "local", "gossip": True where it configures the gossip rather than
the local training (sparsepush.torch.GossipOptimizer takes those)}.)doc");
}

}  // namespace sparsepush_python

#else

namespace sparsepush_python {

void bind_train(py::module_& m) {
  for (const char* name : {"train", "run_options", "RunSpec", "settings_diff"}) refuse_without_train(m, name);
}

}  // namespace sparsepush_python

#endif
