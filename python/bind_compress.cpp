// python/bind_compress.cpp: compressors (Compressor, parse_compressor, default_eta), messages
// (Message), error-compensated compression (compress_with_feedback) and the wire format (encode,
// decode).
#include <cmath>
#include <string>
#include <vector>

#include "bindings.hpp"

namespace sparsepush_python {
namespace {

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

/// The residual a caller hands in is checked as the library checks its inputs (the C++ round
/// trusts its own residual): non_finite_error naming the first NaN/Inf and where.
template <class T>
void check_finite_residual(std::span<const T> e, const sp::context& ctx) {
  for (std::size_t i = 0; i < e.size(); ++i)
    if (!std::isfinite(e[i]))
      throw sp::non_finite_error(std::string("residual holds ") + (std::isnan(e[i]) ? "NaN" : "Inf") + " at index " +
                                     std::to_string(i) + " (" + ctx.where() + ")",
                                 i);
}

std::shared_ptr<py_message> compress_with_feedback(const py_compressor& c, py::handle x, py::handle residual,
                                                   std::uint64_t seed, std::uint32_t node, std::uint32_t round) {
  held_buffer e = take_buffer(residual, "residual", true);
  held_buffer xb = take_buffer(x, "x", false, e.type);
  if (xb.size != e.size)
    throw sp::size_error("compress_with_feedback (node " + std::to_string(node) + ", round " + std::to_string(round) +
                         "): x has " + std::to_string(xb.size) + " elements, the residual " + std::to_string(e.size));
  auto q = std::make_shared<py_message>();
  const sp::context ctx{seed, node, round};
  py::gil_scoped_release nogil;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    const auto ev = e.span<T>();
    check_finite_residual(std::span<const T>(ev), ctx);
    sp::compress_with_feedback<T>(c.impl, std::span<const T>(xb.span<T>()), ev, q->m, ctx);
  };
  if (e.type == dtype::f32) run(float{});
  else run(double{});
  return q;
}

void bind_compressor(py::module_& m) {
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
      "default_eta",
      [](py::handle c) {
        if (py::isinstance<py_compressor>(c)) return sp::default_eta(c.cast<const py_compressor&>().impl);
        return sp::default_eta(sp::parse_compressor(c.cast<std::string>()));
      },
      py::arg("compressor"),
      R"doc(default_eta(compressor) -> float

The consensus step a compressor trains with by default (sparsepush-train's --eta): 1 for identity,
0.2 for QSGD, 0.05 for sign, and for a sparsifier keeping a fraction f: 0.1 at f >= 10%, 0.02 at
f >= 1%, 0.01 below (a count k counts as 1%). compressor: a Compressor or its spec.)doc");
}

void bind_message(py::module_& m) {
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
}

}  // namespace

void bind_compress(py::module_& m) {
  bind_compressor(m);
  bind_message(m);
  m.def(
      "compress_with_feedback",
      &compress_with_feedback,
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
}

}  // namespace sparsepush_python
