// sparsepush/error_feedback.hpp: one node's residual e of error-compensated compression (as
// DeepSqueeze / EF-SGD):  v = x + e;   q = C(v);   e <- v - q.
// The step itself, compress_with_feedback (fused for top-K, and its guarantee that a throw leaves
// e as it was), is compress/feedback.hpp's, which this header includes.
#pragma once

#include <algorithm>
#include <vector>

#include "compress/feedback.hpp"
#include "tensor.hpp"

namespace sparsepush {
inline namespace v0 {

/// One node's residual e (starts at zero) and the step v = x + e; q = C(v); e = v - q.
template <tensor_element T>
class error_feedback {
 public:
  /// A residual of d elements, all zero.
  explicit error_feedback(std::size_t d) : residual_(d, T(0)) {}

  /// Compress x with feedback into q; the residual keeps what q did not carry.
  template <class C, class X>
    requires flat_tensor<X>
  void step(const C& c, const X& x, message& q, const context& ctx) {
    compress_with_feedback<T>(c, as_const_span(x), std::span<T>(residual_), q, ctx);
  }

  /// The same with the caller's scratch.
  template <class C, class X>
    requires flat_tensor<X>
  void step(const C& c, const X& x, message& q, const context& ctx, compress_workspace<T>& ws) {
    compress_with_feedback<T>(c, as_const_span(x), std::span<T>(residual_), q, ctx, ws);
  }

  /// The residual e: what earlier messages did not carry, added to the next step's input.
  std::span<const T> residual() const noexcept { return residual_; }
  /// The residual, writable (a checkpoint's restore, a test).
  std::span<T> residual() noexcept { return residual_; }
  /// Sets the residual to zero.
  void reset() { std::fill(residual_.begin(), residual_.end(), T(0)); }
  /// The vector length d.
  std::size_t size() const noexcept { return residual_.size(); }
  /// Bytes of state this accumulator keeps.
  std::size_t state_bytes() const noexcept { return residual_.size() * sizeof(T); }

 private:
  std::vector<T> residual_;
};

}  // namespace v0
}  // namespace sparsepush
