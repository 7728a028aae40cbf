// Fuzz target: parse_compressor(spec), then compress a vector of d values, encode, decode and
// compare. A spec is either refused with a config_error or yields a compressor whose
// validate_compressor(d) refuses d with a config_error / size_error or promises that compress
// throws nothing but non_finite_error, exactly when the input holds NaN or Inf. The message holds
// every invariant, the kept count is what the compressor promises, every dequantized value is
// finite, the same call without a workspace (and again with the reused one) writes the same
// message, and it survives encode/decode and an envelope. With error feedback: the message is
// that of compress(x + e), the new residual is exactly x + e - q, and a throw changes nothing.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <type_traits>
#include <variant>
#include <vector>

#include <sparsepush/compress/compose.hpp>
#include <sparsepush/error_feedback.hpp>
#include <sparsepush/transport/endpoint.hpp>

#include "fuzz_common.hpp"
#include "fuzz_inputs.hpp"

namespace {

using namespace sparsepush;
using sparsepush_fuzz::same_message;

/// How many values a compressor promises to keep at dimension d: [lo, hi].
std::pair<std::size_t, std::size_t> promised_count(const any_compressor& c, std::size_t d, const context& ctx) {
  return std::visit(
      [&](const auto& impl) -> std::pair<std::size_t, std::size_t> {
        using C = std::decay_t<decltype(impl)>;
        if constexpr (std::is_same_v<C, top_k> || std::is_same_v<C, random_k>) {
          const std::size_t k = impl.k.resolve(d, ctx);
          return {k, k};
        } else if constexpr (std::is_same_v<C, threshold_k>) {
          return {0, 2 * impl.k.resolve(d, ctx)};  // "a message never exceeds 2k values"
        } else {
          return {d, d};  // identity, qsgd, sign: dense
        }
      },
      c.get());
}

template <class T>
void run(const sparsepush_fuzz::compress_input& in, const any_compressor& comp) {
  const std::size_t d = in.d;
  const context ctx{in.seed, in.node, in.round};
  try {
    validate_compressor<T>(comp, d, ctx);
  } catch (const config_error&) {
    return;
  } catch (const size_error&) {
    return;
  }
  const std::vector<T> x = in.vector<T>();
  bool finite = true;
  for (const T v : x) finite &= std::isfinite(v);

  compress_workspace<T> ws;
  message m;
  try {
    comp.compress<T>(std::span<const T>(x), m, ctx, ws);
    SPARSEPUSH_FUZZ_CHECK(finite);
  } catch (const non_finite_error& e) {
    SPARSEPUSH_FUZZ_CHECK(!finite);
    SPARSEPUSH_FUZZ_CHECK(e.index() < d && !std::isfinite(x[e.index()]));
    return;
  }

  sparsepush_fuzz::check_message_invariants(m);
  SPARSEPUSH_FUZZ_CHECK(m.dim == d);
  const auto [lo, hi] = promised_count(comp, d, ctx);
  SPARSEPUSH_FUZZ_CHECK(m.count >= lo && m.count <= hi);
  // q is what error feedback subtracts from x in T: a finite input gives a finite q.
  for (std::size_t j = 0; j < m.count; ++j) SPARSEPUSH_FUZZ_CHECK(std::isfinite(m.value_at<T>(j)));

  message again;
  sparsepush::compress(comp, std::span<const T>(x), again, ctx);  // scratch of its own
  SPARSEPUSH_FUZZ_CHECK(same_message(again, m));
  comp.compress<T>(std::span<const T>(x), again, ctx, ws);  // the reused workspace
  SPARSEPUSH_FUZZ_CHECK(same_message(again, m));

  sparsepush_fuzz::check_round_trip(m);
  std::vector<std::byte> frame;
  const envelope_header h{in.node, in.round, 0.5, 1.0 + in.seed};
  encode_envelope(h, m, frame);
  message received;
  const envelope_header h2 = decode_envelope(frame, received, m.dim);
  SPARSEPUSH_FUZZ_CHECK(h2.from == h.from && h2.round == h.round && h2.share == h.share && h2.u == h.u);
  SPARSEPUSH_FUZZ_CHECK(same_message(received, m));

  if (!in.feedback()) return;
  // e: a residual of the size of x, built from x so that x + e is finite or not as x is.
  std::vector<T> e(d);
  for (std::size_t i = 0; i < d; ++i) e[i] = x[(i * 7 + 3) % d] * T(0.375);
  std::vector<T> v(d);
  bool v_finite = true;
  for (std::size_t i = 0; i < d; ++i) {
    v[i] = x[i] + e[i];
    v_finite &= std::isfinite(v[i]);
  }
  const std::vector<T> e_before = e;
  message fb = m;
  try {
    comp.compress_feedback<T>(std::span<const T>(x), std::span<T>(e), fb, ctx, ws);
    SPARSEPUSH_FUZZ_CHECK(v_finite);
  } catch (const non_finite_error&) {
    SPARSEPUSH_FUZZ_CHECK(!v_finite);
    // strong guarantee: the residual (bit for bit: it may hold NaN) and the message as they were
    SPARSEPUSH_FUZZ_CHECK(std::memcmp(e.data(), e_before.data(), d * sizeof(T)) == 0);
    SPARSEPUSH_FUZZ_CHECK(same_message(fb, m));
    return;
  }
  message ref;
  sparsepush::compress(comp, std::span<const T>(v), ref, ctx);
  SPARSEPUSH_FUZZ_CHECK(same_message(fb, ref));
  std::vector<T> expect = v;
  for_each_value<T>(ref, [&](std::uint32_t i, T q) { expect[i] = v[i] - q; });
  for (std::size_t i = 0; i < d; ++i)
    SPARSEPUSH_FUZZ_CHECK(e[i] == expect[i] || (std::isnan(e[i]) && std::isnan(expect[i])));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto in = sparsepush_fuzz::compress_input::read({data, size});
  any_compressor comp;
  try {
    comp = parse_compressor(in.spec);
  } catch (const config_error&) {
    return 0;
  }
  if (in.use_double()) run<double>(in, comp);
  else run<float>(in, comp);
  return 0;
}
