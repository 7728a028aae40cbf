// python/buffers.hpp: the one door from Python memory into the module: a C-contiguous float32 or
// float64 CPU buffer, taken without a copy from anything that exports the buffer protocol (numpy
// arrays, bytearray-backed views, tensor.numpy()) or DLPack (__dlpack__, __dlpack_device__: torch
// CPU tensors). Anything else is a ValueError that says what was expected and what came.
#pragma once

#include <pybind11/pybind11.h>

#include <dlpack/dlpack.h>

#include <cstddef>
#include <memory>
#include <optional>
#include <span>
#include <string>

namespace sparsepush_python {
namespace py = pybind11;

/// The element type of a buffer.
enum class dtype { f32, f64 };

inline const char* dtype_name(dtype t) noexcept { return t == dtype::f32 ? "float32" : "float64"; }

/// A view of Python-owned memory that keeps its owner (and the export) alive as long as it lives.
/// Destroy it with the GIL held (pybind11 objects).
struct held_buffer {
  void* data = nullptr;
  std::size_t size = 0;  ///< elements
  dtype type = dtype::f32;
  py::object owner;                        ///< the object the memory belongs to
  py::object capsule;                      ///< the DLPack capsule (its deleter runs when it goes)
  std::shared_ptr<py::buffer_info> info;   ///< the buffer-protocol export (released when it goes)

  template <class T>
  std::span<T> span() const noexcept {
    return {static_cast<T*>(data), size};
  }
};

namespace detail {

/// "x" or "direction" etc., for messages.
[[noreturn]] inline void refuse(const char* what, const std::string& why) {
  throw py::value_error(std::string("sparsepush: ") + what + " must be a C-contiguous float32 or float64 CPU buffer "
                        "(a numpy array, or a torch CPU tensor: tensor.detach() or tensor.numpy()); " + why);
}

inline std::optional<dtype> format_dtype(const std::string& f, py::ssize_t itemsize) {
  std::string s = f;
  if (!s.empty() && (s[0] == '<' || s[0] == '=' || s[0] == '@')) s.erase(0, 1);
  if (s == "f" && itemsize == 4) return dtype::f32;
  if (s == "d" && itemsize == 8) return dtype::f64;
  return std::nullopt;
}

inline held_buffer from_buffer_protocol(const py::handle& obj, const char* what, bool writable) {
  held_buffer h;
  auto info = std::make_shared<py::buffer_info>();
  try {
    *info = py::reinterpret_borrow<py::buffer>(obj).request(writable);
  } catch (py::error_already_set& e) {
    if (writable && e.matches(PyExc_BufferError)) refuse(what, "got a read-only buffer (it is written in place)");
    throw;
  }
  const auto t = format_dtype(info->format, info->itemsize);
  if (!t)
    refuse(what, "got elements of format '" + info->format + "' (" + std::to_string(info->itemsize) + " bytes)");
  // C order: the last axis moves fastest, each stride the product of the sizes after it
  py::ssize_t expect = info->itemsize, count = 1;
  for (py::ssize_t k = info->ndim; k-- > 0;) {
    if (info->shape[static_cast<std::size_t>(k)] != 1 && info->strides[static_cast<std::size_t>(k)] != expect)
      refuse(what, "got a non-contiguous buffer (strides do not follow C order: take a .copy() or "
                   "np.ascontiguousarray first)");
    expect *= info->shape[static_cast<std::size_t>(k)];
    count *= info->shape[static_cast<std::size_t>(k)];
  }
  h.data = info->ptr;
  h.size = static_cast<std::size_t>(count);
  h.type = *t;
  h.owner = py::reinterpret_borrow<py::object>(obj);
  h.info = std::move(info);
  return h;
}

inline held_buffer from_dlpack(const py::handle& obj, const char* what) {
  if (py::hasattr(obj, "__dlpack_device__")) {
    const auto dev = obj.attr("__dlpack_device__")().cast<py::tuple>();
    const int type = dev[0].cast<int>();
    if (type != kDLCPU)
      refuse(what, "got a tensor on DLPack device type " + std::to_string(type) +
                       (type == kDLCUDA ? " (a GPU tensor: move it with .cpu())" : " (not the CPU)"));
  }
  py::object cap;
  try {
    cap = obj.attr("__dlpack__")();
  } catch (py::error_already_set& e) {
    refuse(what, std::string("its __dlpack__() failed: ") + e.what() +
                     " (a torch tensor that requires grad: pass tensor.detach(), which shares its memory)");
  }
  if (!PyCapsule_IsValid(cap.ptr(), "dltensor")) refuse(what, "its __dlpack__() did not return an unused DLPack capsule");
  auto* m = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(cap.ptr(), "dltensor"));
  const DLTensor& t = m->dl_tensor;
  if (t.device.device_type != kDLCPU)
    refuse(what, "got a tensor on DLPack device type " + std::to_string(static_cast<int>(t.device.device_type)) +
                     (t.device.device_type == kDLCUDA ? " (a GPU tensor: move it with .cpu())" : " (not the CPU)"));
  if (t.dtype.code != kDLFloat || t.dtype.lanes != 1 || (t.dtype.bits != 32 && t.dtype.bits != 64))
    refuse(what, "got DLPack elements of type code " + std::to_string(t.dtype.code) + ", " +
                     std::to_string(t.dtype.bits) + " bits");
  std::int64_t count = 1;
  if (t.strides) {
    std::int64_t expect = 1;
    for (int k = t.ndim; k-- > 0;) {
      if (t.shape[k] != 1 && t.strides[k] != expect)
        refuse(what, "got a non-contiguous tensor (strides do not follow C order: call .contiguous() first)");
      expect *= t.shape[k];
    }
  }
  for (int k = 0; k < t.ndim; ++k) count *= t.shape[k];
  held_buffer h;
  h.data = static_cast<char*>(t.data) + t.byte_offset;
  h.size = static_cast<std::size_t>(count);
  h.type = t.dtype.bits == 32 ? dtype::f32 : dtype::f64;
  h.owner = py::reinterpret_borrow<py::object>(obj);
  h.capsule = std::move(cap);  // not renamed: the capsule's destructor calls the deleter when it goes
  return h;
}

}  // namespace detail

/// Take obj's memory without copying (see the header comment). `writable`: the module writes it.
inline held_buffer take_buffer(const py::handle& obj, const char* what, bool writable) {
  if (obj.is_none()) detail::refuse(what, "got None");
  held_buffer h;
  if (PyObject_CheckBuffer(obj.ptr())) h = detail::from_buffer_protocol(obj, what, writable);
  else if (py::hasattr(obj, "__dlpack__")) h = detail::from_dlpack(obj, what);
  else
    detail::refuse(what, std::string("got a ") + py::str(py::type::handle_of(obj).attr("__name__")).cast<std::string>() +
                             ", which exports neither the buffer protocol nor DLPack");
  if (h.size == 0) detail::refuse(what, "got an empty buffer");
  return h;
}

/// The same, also requiring the element type `want`.
inline held_buffer take_buffer(const py::handle& obj, const char* what, bool writable, dtype want) {
  held_buffer h = take_buffer(obj, what, writable);
  if (h.type != want)
    detail::refuse(what, std::string("got ") + dtype_name(h.type) + " where the node holds " + dtype_name(want));
  return h;
}

}  // namespace sparsepush_python
