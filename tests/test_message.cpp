// Tests of sparsepush/message.hpp: exact wire sizes, round trips of every compressor x encoding,
// and a decoder that rejects truncated, oversized, corrupted and inconsistent buffers.
#include <catch2/catch.hpp>
#include <sparsepush/sparsepush.hpp>

#include "test_util.hpp"

using namespace sparsepush;

namespace {
const std::vector<value_codec> all_codecs = {
    {value_encoding::native, 0}, {value_encoding::f64, 0},  {value_encoding::f32, 0},
    {value_encoding::f16, 0},    {value_encoding::bf16, 0}, {value_encoding::i8, 0},
    {value_encoding::sign, 0},   {value_encoding::qsgd, 1}, {value_encoding::qsgd, 7},
    {value_encoding::qsgd, 300}};

std::vector<any_compressor> all_compressors() {
  std::vector<any_compressor> out;
  for (const auto& c : all_codecs) {
    out.emplace_back(identity{c});
    for (auto ie : {index_encoding::automatic, index_encoding::raw_u32, index_encoding::delta_varint}) {
      out.emplace_back(top_k{k_spec::fraction(0.05), c, ie});
      out.emplace_back(random_k{k_spec::fraction(0.05), false, c, ie});
      out.emplace_back(random_k{k_spec::count(1), true, c, ie});
      out.emplace_back(threshold_k{k_spec::fraction(0.05), 512, c, ie});
    }
  }
  out.emplace_back(qsgd{1});
  out.emplace_back(qsgd{16});
  out.emplace_back(scaled_sign{});
  return out;
}

bool same_message(const message& a, const message& b) {
  return a.dim == b.dim && a.count == b.count && a.index_enc == b.index_enc &&
         a.value_enc == b.value_enc && a.levels == b.levels &&
         std::bit_cast<std::uint32_t>(a.scale) == std::bit_cast<std::uint32_t>(b.scale) &&
         a.indices == b.indices && a.payload == b.payload;
}
}  // namespace

TEMPLATE_TEST_CASE("every compressor x encoding round-trips with wire_bytes == encoded size",
                   "[message]", float, double) {
  using T = TestType;
  for (std::size_t d : {1u, 9u, 1000u, 20001u}) {
    const auto v = test::gaussian<T>(d, static_cast<unsigned>(d));
    for (const auto& c : all_compressors()) {
      message m;
      c.compress(std::span<const T>(v), m, {77, 1, 2});
      const auto bytes = encode(m);
      REQUIRE(bytes.size() == m.wire_bytes());
      const message back = decode(bytes);
      REQUIRE(same_message(m, back));
      REQUIRE(test::dense<T>(back) == test::dense<T>(m));
      REQUIRE(encode(back) == bytes);
      // size accounting: header + indices + values
      const std::size_t vb = payload_bytes(m.value_enc, m.levels, m.count);
      REQUIRE(m.payload.size() == vb);
      if (m.index_enc == index_encoding::raw_u32) REQUIRE(m.index_bytes() == 4ull * m.count);
      if (m.dense()) REQUIRE(m.index_bytes() == 0);
    }
  }
}

TEST_CASE("wire sizes are header + indices + values", "[message]") {
  const std::size_t d = 1000000;
  const auto v = test::gaussian<float>(d, 1);
  message m;
  top_k{k_spec::fraction(0.01), {}, index_encoding::raw_u32}.compress(std::span<const float>(v), m, {});
  REQUIRE(m.wire_bytes() == 32 + 4 * 10000 + 4 * 10000);
  top_k{k_spec::fraction(0.01), {value_encoding::f16, 0}, index_encoding::raw_u32}.compress(
      std::span<const float>(v), m, {});
  REQUIRE(m.wire_bytes() == 32 + 4 * 10000 + 2 * 10000);
  identity{}.compress(std::span<const float>(v), m, {});
  REQUIRE(m.wire_bytes() == 32 + 4 * d);
  scaled_sign{}.compress(std::span<const float>(v), m, {});
  REQUIRE(m.wire_bytes() == 32 + d / 8);
  // delta + varint is a real win at k/d = 0.1% (mean gap 1000: mostly 2-byte varints)
  top_k{k_spec::fraction(0.001), {}, index_encoding::delta_varint}.compress(std::span<const float>(v), m, {});
  REQUIRE(m.index_bytes() < 2 * 1000 + 100);
  REQUIRE(m.index_bytes() >= 1000);
  REQUIRE(m.wire_bytes() == encode(m).size());
}

TEST_CASE("automatic index encoding picks the smaller section", "[message]") {
  const auto v = test::gaussian<float>(100000, 3);
  for (double f : {0.001, 0.01, 0.1, 1.0}) {
    message a, raw, var;
    top_k{k_spec::fraction(f)}.compress(std::span<const float>(v), a, {});
    top_k{k_spec::fraction(f), {}, index_encoding::raw_u32}.compress(std::span<const float>(v), raw, {});
    top_k{k_spec::fraction(f), {}, index_encoding::delta_varint}.compress(std::span<const float>(v), var, {});
    REQUIRE(a.wire_bytes() == std::min(raw.wire_bytes(), var.wire_bytes()));
  }
}

TEST_CASE("decode rejects every truncation and every extension", "[message]") {
  const auto v = test::gaussian<float>(300, 5);
  for (const auto& c : {any_compressor(top_k{k_spec::count(20)}), any_compressor(qsgd{5}),
                        any_compressor(scaled_sign{}),
                        any_compressor(random_k{k_spec::count(9), false, {value_encoding::i8, 0}})}) {
    message m;
    c.compress(std::span<const float>(v), m, {});
    const auto bytes = encode(m);
    for (std::size_t n = 0; n < bytes.size(); ++n)
      REQUIRE_THROWS_AS(decode(std::span(bytes).first(n)), decode_error);
    auto longer = bytes;
    longer.push_back(std::byte{0});
    REQUIRE_THROWS_WITH(decode(longer), Catch::Contains("oversized"));
    REQUIRE_THROWS_WITH(decode(std::span(bytes).first(bytes.size() - 1)), Catch::Contains("truncated"));
    REQUIRE_THROWS_WITH(decode(std::span(bytes).first(10)), Catch::Contains("shorter than"));
  }
}

TEST_CASE("decode rejects every single-bit corruption", "[message]") {
  const auto v = test::gaussian<float>(200, 6);
  for (const auto& c : {any_compressor(top_k{k_spec::count(10), {value_encoding::f16, 0}}),
                        any_compressor(qsgd{3}), any_compressor(identity{})}) {
    message m;
    c.compress(std::span<const float>(v), m, {});
    const auto bytes = encode(m);
    for (std::size_t bit = 0; bit < 8 * bytes.size(); ++bit) {
      auto bad = bytes;
      bad[bit / 8] ^= std::byte(1u << (bit % 8));
      REQUIRE_THROWS_AS(decode(bad), decode_error);
    }
  }
}

namespace {
/// Re-seal a hand-edited buffer with a valid checksum, so the structural checks are reached.
void reseal(std::vector<std::byte>& b) {
  std::uint32_t crc = detail::crc32_update(0, std::span(b).first(28));
  crc = detail::crc32_update(crc, std::span(b).subspan(32));
  detail::put_u32(b.data() + 28, crc);
}
}  // namespace

TEST_CASE("decode names structural problems even under a valid checksum", "[message]") {
  std::vector<float> v{5, -1, 0, 3, 0, 0, 7, 0};
  message m;
  top_k{k_spec::count(3), {}, index_encoding::raw_u32}.compress(std::span<const float>(v), m, {});
  REQUIRE(m.indices == std::vector<std::uint32_t>{0, 3, 6});
  const auto good = encode(m);
  auto edit = [&](auto f) {
    auto b = good;
    f(b);
    reseal(b);
    return b;
  };
  REQUIRE_THROWS_WITH(decode(edit([](auto& b) { b[0] = std::byte{'X'}; })), Catch::Contains("magic"));
  REQUIRE_THROWS_WITH(decode(edit([](auto& b) { b[4] = std::byte{9}; })), Catch::Contains("version 9"));
  REQUIRE_THROWS_WITH(decode(edit([](auto& b) { b[5] = std::byte{7}; })), Catch::Contains("index encoding 7"));
  REQUIRE_THROWS_WITH(decode(edit([](auto& b) { b[6] = std::byte{0}; })), Catch::Contains("value encoding 0"));
  REQUIRE_THROWS_WITH(decode(edit([](auto& b) { b[7] = std::byte{1}; })), Catch::Contains("reserved"));
  REQUIRE_THROWS_WITH(decode(edit([](auto& b) { b[8] = std::byte{2}; })), Catch::Contains("levels"));
  // count above dim
  REQUIRE_THROWS_WITH(decode(edit([](auto& b) { detail::put_u32(b.data() + 12, 2); })),
                      Catch::Contains("exceeds dim"));
  // index out of range (dim shrunk to 5: index 6 is invalid)
  REQUIRE_THROWS_WITH(decode(edit([](auto& b) { detail::put_u32(b.data() + 12, 5); })),
                      Catch::Contains("out of range"));
  // indices not ascending
  REQUIRE_THROWS_WITH(decode(edit([](auto& b) { detail::put_u32(b.data() + 32 + 4, 0); })),
                      Catch::Contains("not ascending"));
  // a NaN value
  REQUIRE_THROWS_WITH(decode(edit([](auto& b) { detail::put_u32(b.data() + 32 + 12, 0x7FC00000u); })),
                      Catch::Contains("not finite"));
  // negative scale
  REQUIRE_THROWS_WITH(decode(edit([](auto& b) { detail::put_u32(b.data() + 24, 0xBF800000u); })),
                      Catch::Contains("scale"));
  // decode into an existing message leaves it untouched on failure
  message keep = m;
  auto bad = good;
  bad[40] ^= std::byte{1};
  REQUIRE_THROWS_AS(decode(bad, keep), decode_error);
  REQUIRE(keep.indices == m.indices);
  REQUIRE(keep.payload == m.payload);
}

TEST_CASE("decode survives random garbage", "[message]") {
  std::mt19937 g(11);
  const auto v = test::gaussian<float>(100, 1);
  message m;
  top_k{k_spec::count(10), {value_encoding::qsgd, 5}}.compress(std::span<const float>(v), m, {});
  const auto good = encode(m);
  for (int trial = 0; trial < 20000; ++trial) {
    std::vector<std::byte> b;
    if (trial % 2) {
      b.resize(g() % 200);
      for (auto& x : b) x = std::byte(g() & 0xFF);
    } else {  // a valid message with random bytes overwritten, then resealed
      b = good;
      for (int i = 0; i < 3; ++i) b[g() % b.size()] = std::byte(g() & 0xFF);
      if (b.size() >= 32) reseal(b);
    }
    try {
      const message out = decode(b);
      // accepted: then it must be self-consistent
      REQUIRE(out.wire_bytes() == b.size());
      REQUIRE(encode(out) == b);
    } catch (const decode_error&) {
    }
  }
}

TEST_CASE("decompress checks the output size", "[message]") {
  message m;
  const std::vector<double> v{1, 2, 3};
  identity{}.compress(std::span<const double>(v), m, {});
  std::vector<double> out(4);
  REQUIRE_THROWS_WITH(decompress(m, out), Catch::Contains("dim 3") && Catch::Contains("4 elements"));
}
