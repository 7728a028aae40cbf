// Tests of validate(message, dim): decode's checks on a message in memory (the CRC aside), and
// the check of every message a user's compressor writes before anything reads it: a malformed
// one (short payload, unsorted, repeated or out-of-range indices, count above dim, the setting
// native or automatic where a wire encoding belongs) is a message_error naming the problem, and
// the round leaves x, u and e of every node as they were.
#include <catch2/catch.hpp>
#include <cstring>
#include <span>
#include <sparsepush/sparsepush.hpp>
#include <string>
#include <vector>

#include "test_util.hpp"

using namespace sparsepush;

namespace {

enum class flaw {
  none,
  short_payload,
  unsorted,
  duplicate,
  out_of_range,
  count_above_dim,
  dense_with_indices,
  native_values,       // a compressor setting in place of a wire encoding
  automatic_indices,   // the same for the indices
};

/// A sparse fp32 message of v at `idx` (as given: not sorted or checked), `bytes_per_value` payload
/// bytes per value (4 is right for fp32).
template <class T>
void write_sparse(std::span<const T> v, std::vector<std::uint32_t> idx, std::size_t bytes_per_value, message& m) {
  m.dim = static_cast<std::uint32_t>(v.size());
  m.count = static_cast<std::uint32_t>(idx.size());
  m.index_enc = index_encoding::raw_u32;
  m.value_enc = value_encoding::f32;
  m.levels = 0;
  m.scale = 0.0f;
  m.payload.assign(bytes_per_value * idx.size(), std::byte{0});
  for (std::size_t j = 0; j < idx.size() && bytes_per_value == 4; ++j) {
    const float q = idx[j] < v.size() ? static_cast<float>(v[idx[j]]) : 1.0f;
    std::memcpy(m.payload.data() + 4 * j, &q, 4);
  }
  m.indices = std::move(idx);
}

/// A user's compressor (not a built-in) that keeps coordinates 1, 3, 5, or writes one flaw.
struct flawed {
  flaw f = flaw::none;

  template <tensor_element T>
  void compress(std::span<const T> v, message& m, const context&) const {
    const auto d = static_cast<std::uint32_t>(v.size());
    switch (f) {
      case flaw::none: write_sparse(v, {1, 3, 5}, 4, m); break;
      case flaw::short_payload: write_sparse(v, {1, 3, 5}, 2, m); break;  // 2 bytes per fp32 value
      case flaw::unsorted: write_sparse(v, {1, 5, 3}, 4, m); break;
      case flaw::duplicate: write_sparse(v, {1, 3, 3}, 4, m); break;
      case flaw::out_of_range: write_sparse(v, {1, 3, d}, 4, m); break;
      case flaw::count_above_dim: {
        std::vector<std::uint32_t> all(d + 1);
        for (std::uint32_t i = 0; i <= d; ++i) all[i] = i;
        write_sparse(v, all, 4, m);
        break;
      }
      case flaw::dense_with_indices:
        write_sparse(v, {1, 3, 5}, 4, m);
        m.index_enc = index_encoding::dense;
        break;
      case flaw::native_values:
        write_sparse(v, {1, 3, 5}, 4, m);
        m.value_enc = value_encoding::native;
        break;
      case flaw::automatic_indices:
        write_sparse(v, {1, 3, 5}, 4, m);
        m.index_enc = index_encoding::automatic;
        break;
    }
  }
};

/// The same with a fused error-feedback path that writes e before the message is checked.
struct flawed_fused : flawed {
  template <tensor_element T>
  void compress_feedback(std::span<const T> x, std::span<T> e, message& m, const context& ctx) const {
    for (std::size_t i = 0; i < x.size(); ++i) e[i] = x[i] + e[i];
    compress(std::span<const T>(e), m, ctx);
    if (m.dense() || m.payload.size() != 4 * m.indices.size()) return;
    for (std::size_t j = 0; j < m.count; ++j)
      if (m.indices[j] < e.size()) e[m.indices[j]] -= m.template value_at<T>(j);
  }
};

struct flaw_case {
  flaw f;
  const char* says;
};
const flaw_case flaw_cases[] = {
    {flaw::short_payload, "payload of 6 bytes"},
    {flaw::unsorted, "index 3 at position 2 is not ascending: it is below the index at position 1 (5)"},
    {flaw::duplicate, "index 3 at position 2 is not ascending: it repeats the index at position 1"},
    {flaw::out_of_range, "index 16 at position 2 is out of range (not below dim 16)"},
    {flaw::count_above_dim, "count 17 exceeds dim 16"},
    {flaw::dense_with_indices, "dense message with count 3 != dim 16"},
    {flaw::native_values, "value encoding 0 (native) is a compressor setting, not a wire encoding"},
    {flaw::automatic_indices, "index encoding 255 (auto) is a compressor setting, not a wire encoding"},
};

}  // namespace

TEST_CASE("validate: a well-formed message passes, each flaw is named", "[message]") {
  const auto v = test::gaussian<float>(16, 1);
  message m;
  flawed{}.compress(std::span<const float>(v), m, {});
  REQUIRE_NOTHROW(validate(m, 16));
  REQUIRE_THROWS_WITH(validate(m, 17), Catch::Contains("message has dim 16, the vector has 17 elements"));
  for (const auto& c : flaw_cases) {
    CAPTURE(c.says);
    flawed{c.f}.compress(std::span<const float>(v), m, {});
    REQUIRE_THROWS_AS(validate(m, 16), message_error);
    REQUIRE_THROWS_WITH(validate(m, 16), Catch::Contains(c.says));
  }
  // the short payload names the sizes: 3 fp32 values need 12 bytes
  flawed{flaw::short_payload}.compress(std::span<const float>(v), m, {});
  REQUIRE_THROWS_WITH(validate(m, 16), Catch::Contains("3 fp32 values need 12"));
  // decode's value checks too: a NaN value, and a message of every built-in passes
  flawed{}.compress(std::span<const float>(v), m, {});
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::memcpy(m.payload.data() + 4, &nan, 4);
  REQUIRE_THROWS_WITH(validate(m, 16), Catch::Contains("value 1 is not finite"));
  for (const auto& spec : {"identity", "top-k:0.25+int8", "random-k:4+qsgd:5", "sign", "threshold:0.2", "qsgd:3",
                           "top-k:3+varint", "random-k:0.5+fp16"}) {
    message q;
    compress_workspace<float> ws;
    compress_with<float>(parse_compressor(spec), std::span<const float>(v), q, {3, 1, 2}, ws);
    REQUIRE_NOTHROW(validate(q, 16));
  }
}

TEMPLATE_TEST_CASE("a user compressor's malformed message throws before any node changes", "[gossip]", float, double) {
  using T = TestType;
  using vec = std::vector<T>;
  const std::size_t n = 4, d = 16;
  std::vector<vec> x0;
  for (std::size_t i = 0; i < n; ++i) x0.push_back(test::gaussian<T>(d, static_cast<unsigned>(10 + i)));
  const auto s = parse_schedule("exponential", n);
  auto run = [&](auto good, auto bad) {
    push_sum_group<vec> g(x0, {0.5, true, 2});
    loopback_network net(n);
    g.round(s, good, net, 0);  // residuals and weights away from their start
    auto snapshot = [&] { return test::group_state(g); };
    const auto before = snapshot();
    const auto bytes = net.total_bytes();
    for (const auto& c : flaw_cases) {
      CAPTURE(c.says);
      bad.f = c.f;
      try {
        g.round(s, bad, net, 1);
        FAIL("no exception");
      } catch (const message_error& e) {
        const std::string what = e.what();
        REQUIRE(what.find(c.says) != std::string::npos);
        REQUIRE(what.find("round 1") != std::string::npos);
      }
      REQUIRE(snapshot() == before);
      REQUIRE(net.total_bytes() == bytes);
    }
    REQUIRE_NOTHROW(g.round(s, good, net, 1));
  };
  run(flawed{}, flawed{});
  run(flawed_fused{}, flawed_fused{});
}
