// python/bind_exceptions.cpp: the C++ sparsepush::error family as Python classes of the same
// names (ConfigError and the C++ spelling config_error, ...), all derived from sparsepush.Error,
// and the translator that raises them with the C++ message (and .index, .offset where the C++
// exception has them). DivergedError is Python's own: train() raises it for a diverged run.
#include <string>

#include <sparsepush/data/idx.hpp>

#include "bindings.hpp"

namespace sparsepush_python {
namespace {

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
  PyObject* data = nullptr;
  PyObject* diverged = nullptr;
} exc;

PyObject* new_exception(py::module_& m, const char* name, const char* snake, const char* doc, py::tuple bases) {
  const std::string qual = std::string("sparsepush.") + name;
  PyObject* t = PyErr_NewExceptionWithDoc(qual.c_str(), doc, bases.ptr(), nullptr);
  if (!t) throw py::error_already_set();
  m.add_object(name, py::handle(t));
  if (snake) m.add_object(snake, py::handle(t));  // the C++ name, as an alias
  return t;
}

void add_classes(py::module_& m) {
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
  exc.data = new_exception(m, "DataError", "data_error",
                           "A data file is missing, truncated or malformed (C++ sparsepush::data_error).", b(exc.error));
  exc.diverged = new_exception(m, "DivergedError", nullptr,
                               "train(): the run diverged (the loss grew past its guard or the models drifted apart); "
                               "the message names the round and what to lower.",
                               b(exc.error, PyExc_ArithmeticError));
}

void raise(PyObject* type, const char* what, const char* attr = nullptr, std::size_t value = 0) {
  py::object e = py::reinterpret_borrow<py::object>(type)(what);
  if (attr) e.attr(attr) = value;
  PyErr_SetObject(type, e.ptr());
}

void translate(std::exception_ptr p) {
  if (!p) return;
  try {
    std::rethrow_exception(p);
#ifdef SPARSEPUSH_PYTHON_MPI
  } catch (const sp::mpi_error& e) {
    mpi_out_of_step = true;
    raise(exc.mpi, e.what());
#endif
  } catch (const sp::transport_error& e) {
    if (live_mpi_networks > 0) mpi_out_of_step = true;
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
  } catch (const sp::data_error& e) {
    raise(exc.data, e.what());
  } catch (const sp::error& e) {
    raise(exc.error, e.what());
  }
}

}  // namespace

void bind_exceptions(py::module_& m) {
  add_classes(m);
  py::register_exception_translator(translate);
}

PyObject* diverged_error_type() { return exc.diverged; }

}  // namespace sparsepush_python
