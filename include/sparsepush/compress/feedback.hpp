// sparsepush/compress/feedback.hpp: error-compensated compression as one step of every compressor
// (as DeepSqueeze / EF-SGD):  v = x + e;   q = C(v);   e <- v - q.
// Compressors with a fused path (top-K) do it without materialising v: one pass reads x and e to
// select and to check for NaN/Inf, a second writes e = x + e and, while each chunk of it is in
// cache, takes the kept values and subtracts them (5 streams of d values against the 3 of a bare
// e = x + e: writing e in the first pass would break the guarantee below). The others compute v
// into the caller's workspace, compress it, then write e. Either way a throw (bad size, NaN/Inf,
// bad k, a malformed message of a user's compressor) leaves e as it was (and the message as it
// was, for the built-ins). The residual a node keeps between rounds is error_feedback.hpp's.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "../tensor.hpp"
#include "common.hpp"

namespace sparsepush {
inline namespace v0 {

namespace detail {
/// A compressor with the fused local step of top_k (plan_step, apply_step, fuses_step) for T.
template <class C, class T>
concept fused_step_compressor =
    requires(const C& c, std::span<const T> x, std::span<T> y, T g, std::vector<std::uint32_t>& plan, message& m,
             const context& ctx, compress_workspace<T>& ws) {
      { c.fuses_step() } -> std::convertible_to<bool>;
      c.plan_step(x, x, g, x, plan, ctx, ws);
      c.apply_step(y, x, g, y, std::span<const std::uint32_t>(plan), m, ctx);
    };

/// Whether c fuses the local step with error feedback (plan_step and apply_step, as top_k): only
/// the built-ins that say so; a user's compressor takes the unfused path (local step, then
/// compress_with_feedback).
template <class C>
bool fuses_step(const C& c) noexcept {
  if constexpr (is_builtin_compressor<C> && requires {
                  { c.fuses_step() } -> std::convertible_to<bool>;
                })
    return c.fuses_step();
  else
    return false;
}
}  // namespace detail

/// Error-compensated compression over spans with the caller's scratch: v = x + e; q = C(v);
/// e = v - q. Uses c.compress_feedback(x, e, q, ctx, ws) where C offers it, then
/// c.compress_feedback(x, e, q, ctx), else v = x + e in ws.v and compress_with.
template <tensor_element T, class C>
void compress_with_feedback(const C& c, std::span<const T> x, std::span<T> e, message& q,
                            const context& ctx, compress_workspace<T>& ws) {
  static_assert(compressor_for<C, T>, "sparsepush: C is not a compressor for this element type "
                                      "(it needs compress(std::span<const T>, message&, const context&))");
  if (x.size() != e.size())
    throw size_error("error feedback: x has " + std::to_string(x.size()) +
                     " elements but the residual e has " + std::to_string(e.size()) + " at " +
                     ctx.where());
  constexpr bool fused_ws = requires { c.compress_feedback(x, e, q, ctx, ws); };
  constexpr bool fused = fused_ws || requires { c.compress_feedback(x, e, q, ctx); };
  if constexpr (fused && detail::is_builtin_compressor<C>) {
    if constexpr (fused_ws) c.compress_feedback(x, e, q, ctx, ws);
    else c.compress_feedback(x, e, q, ctx);
  } else if constexpr (fused) {
    // a user's fused path writes e before its message can be checked: keep e until it is
    const std::vector<T> kept(e.begin(), e.end());
    if constexpr (fused_ws) c.compress_feedback(x, e, q, ctx, ws);
    else c.compress_feedback(x, e, q, ctx);
    try {
      detail::check_compressed(q, x.size(), ctx);
    } catch (...) {
      std::copy(kept.begin(), kept.end(), e.begin());
      throw;
    }
  } else {
    auto& v = ws.v;
    v.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) v[i] = x[i] + e[i];
    compress_with<T>(c, std::span<const T>(v), q, ctx, ws);  // validates v; throws before e is written
    std::copy(v.begin(), v.end(), e.begin());
    for_each_value<T>(q, [e](std::uint32_t i, T qi) { e[i] -= qi; });
  }
}

/// Error-compensated compression over spans: v = x + e; q = C(v); e = v - q, with scratch of its
/// own (allocated per call; pass a workspace to reuse it).
template <tensor_element T, compressor_for<T> C>
void compress_with_feedback(const C& c, std::span<const T> x, std::span<T> e, message& q,
                            const context& ctx) {
  compress_workspace<T> ws;
  compress_with_feedback<T>(c, x, e, q, ctx, ws);
}

/// Error-compensated compression over any tensors: x read, e updated in place.
template <class X, class E, class C>
  requires flat_tensor<X> && mutable_flat_tensor<E&>
void compress_with_feedback(const C& c, const X& x, E& e, message& q, const context& ctx) {
  using T = tensor_value_t<X>;
  static_assert(std::is_same_v<T, tensor_value_t<E>>,
                "sparsepush: x and the residual e must have the same element type");
  static_assert(compressor_for<C, T>, "sparsepush: C is not a compressor for this element type "
                                      "(it needs compress(std::span<const T>, message&, const context&))");
  compress_with_feedback<T>(c, as_const_span(x), as_span(e), q, ctx);
}

/// The same with the caller's scratch.
template <class X, class E, class C>
  requires flat_tensor<X> && mutable_flat_tensor<E&>
void compress_with_feedback(const C& c, const X& x, E& e, message& q, const context& ctx,
                            compress_workspace<tensor_value_t<X>>& ws) {
  using T = tensor_value_t<X>;
  static_assert(std::is_same_v<T, tensor_value_t<E>>,
                "sparsepush: x and the residual e must have the same element type");
  compress_with_feedback<T>(c, as_const_span(x), as_span(e), q, ctx, ws);
}

}  // namespace v0
}  // namespace sparsepush
