// Tests of sparsepush/message.hpp and its wire codec (wire.hpp): exact wire sizes, round trips of
// every compressor x encoding, bytes against a hand-written layout, and a decoder that rejects
// truncated, oversized, corrupted and inconsistent buffers.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <sparsepush/sparsepush.hpp>
#include <type_traits>

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
      compress(c, std::span<const T>(v), m, {77, 1, 2});
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
  compress(top_k{k_spec::fraction(0.01), {}, index_encoding::raw_u32}, std::span<const float>(v), m, {});
  REQUIRE(m.wire_bytes() == 32 + 4 * 10000 + 4 * 10000);
  compress(top_k{k_spec::fraction(0.01), {value_encoding::f16, 0}, index_encoding::raw_u32}, 
      std::span<const float>(v), m, {});
  REQUIRE(m.wire_bytes() == 32 + 4 * 10000 + 2 * 10000);
  compress(identity{}, std::span<const float>(v), m, {});
  REQUIRE(m.wire_bytes() == 32 + 4 * d);
  compress(scaled_sign{}, std::span<const float>(v), m, {});
  REQUIRE(m.wire_bytes() == 32 + d / 8);
  // delta + varint is a real win at k/d = 0.1% (mean gap 1000: mostly 2-byte varints)
  compress(top_k{k_spec::fraction(0.001), {}, index_encoding::delta_varint}, std::span<const float>(v), m, {});
  REQUIRE(m.index_bytes() < 2 * 1000 + 100);
  REQUIRE(m.index_bytes() >= 1000);
  REQUIRE(m.wire_bytes() == encode(m).size());
}

TEST_CASE("automatic index encoding picks the smaller section", "[message]") {
  const auto v = test::gaussian<float>(100000, 3);
  for (double f : {0.001, 0.01, 0.1, 1.0}) {
    message a, raw, var;
    compress(top_k{k_spec::fraction(f)}, std::span<const float>(v), a, {});
    compress(top_k{k_spec::fraction(f), {}, index_encoding::raw_u32}, std::span<const float>(v), raw, {});
    compress(top_k{k_spec::fraction(f), {}, index_encoding::delta_varint}, std::span<const float>(v), var, {});
    REQUIRE(a.wire_bytes() == std::min(raw.wire_bytes(), var.wire_bytes()));
  }
}

TEST_CASE("decode through a scratch message: the same message, out untouched on a bad buffer", "[message]") {
  const auto v = test::gaussian<float>(300, 6);
  message first, second;
  compress(top_k{k_spec::count(20)}, std::span<const float>(v), first, {});
  compress(top_k{k_spec::count(7), value_codec{value_encoding::i8}}, std::span<const float>(test::gaussian<float>(300, 7)),
                                                                    second, {});
  message out, scratch;
  auto same = [](const message& a, const message& b) { return encode(a) == encode(b); };
  decode(encode(first), out, 300, scratch);
  REQUIRE(same(out, first));
  decode(encode(second), out, 300, scratch);  // into the buffers the first one left in scratch
  REQUIRE(same(out, second));
  REQUIRE(same(scratch, first));  // the previous message's buffers, ready for the next decode
  // a truncated buffer, a flipped byte (CRC) and another dimension: errors, and out as it was
  auto bytes = encode(first);
  auto flipped = bytes;
  flipped[bytes.size() - 3] ^= std::byte{0x40};
  REQUIRE_THROWS_AS(decode(std::span(bytes).first(bytes.size() - 1), out, 300, scratch), decode_error);
  REQUIRE(same(out, second));
  REQUIRE_THROWS_AS(decode(flipped, out, 300, scratch), decode_error);
  REQUIRE(same(out, second));
  REQUIRE_THROWS_WITH(decode(bytes, out, 301, scratch), Catch::Contains("announces dim 300"));
  REQUIRE(same(out, second));
  decode(bytes, out, 300, scratch);  // a garbage scratch is fine for the next decode
  REQUIRE(same(out, first));
}

TEST_CASE("decode rejects every truncation and every extension", "[message]") {
  const auto v = test::gaussian<float>(300, 5);
  for (const auto& c : {any_compressor(top_k{k_spec::count(20)}), any_compressor(qsgd{5}),
                        any_compressor(scaled_sign{}),
                        any_compressor(random_k{k_spec::count(9), false, {value_encoding::i8, 0}})}) {
    message m;
    compress(c, std::span<const float>(v), m, {});
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
    compress(c, std::span<const float>(v), m, {});
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
  compress(top_k{k_spec::count(3), {}, index_encoding::raw_u32}, std::span<const float>(v), m, {});
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
  compress(top_k{k_spec::count(10), {value_encoding::qsgd, 5}}, std::span<const float>(v), m, {});
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
  compress(identity{}, std::span<const double>(v), m, {});
  std::vector<double> out(4);
  REQUIRE_THROWS_WITH(decompress(m, out), Catch::Contains("dim 3") && Catch::Contains("4 elements"));
}

namespace {
/// Little-endian bytes written by hand, independent of the codec under test.
struct le_bytes {
  std::vector<std::byte> b;
  le_bytes& u8(unsigned v) {
    b.push_back(std::byte(v & 0xFF));
    return *this;
  }
  le_bytes& u16(unsigned v) { return u8(v).u8(v >> 8); }
  le_bytes& u32(std::uint32_t v) { return u16(v & 0xFFFF).u16(v >> 16); }
  le_bytes& u64(std::uint64_t v) { return u32(static_cast<std::uint32_t>(v)).u32(static_cast<std::uint32_t>(v >> 32)); }
  le_bytes& f32(float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    return u32(u);
  }
  le_bytes& append(const std::vector<std::byte>& more) {
    b.insert(b.end(), more.begin(), more.end());
    return *this;
  }
};

/// Header (magic, version, encodings, levels, dim, count, index bytes, scale) + body, sealed with
/// zlib's CRC-32 of every byte but the checksum field.
std::vector<std::byte> hand_message(unsigned index_enc, unsigned value_enc, unsigned levels, std::uint32_t dim,
                                    std::uint32_t count, const std::vector<std::byte>& index_section,
                                    float scale, const std::vector<std::byte>& values) {
  le_bytes h;
  h.u8('S').u8('P').u8('S').u8('H').u8(1).u8(index_enc).u8(value_enc).u8(0).u16(levels).u16(0);
  h.u32(dim).u32(count).u32(static_cast<std::uint32_t>(index_section.size())).f32(scale);
  le_bytes body;
  body.append(index_section).append(values);
  auto* p = reinterpret_cast<const Bytef*>(h.b.data());
  uLong crc = ::crc32(0L, p, 28);
  crc = ::crc32(crc, reinterpret_cast<const Bytef*>(body.b.data()), static_cast<uInt>(body.b.size()));
  h.u32(static_cast<std::uint32_t>(crc));
  return h.append(body.b).b;
}
}  // namespace

TEST_CASE("every value x index encoding encodes to the hand-written wire layout", "[message]") {
  // Three values chosen so that every encoding is exact or has one obvious rounding:
  // ||(2, -6, 9)||_2 = 11, so QSGD with 11 levels has integer levels (no randomness is used).
  const std::vector<float> vals{2.0f, -6.0f, 9.0f};
  const std::uint32_t d = 300;
  const std::vector<std::uint32_t> at{1, 130, 299};
  std::vector<float> sparse_v(d, 0.0f);
  for (std::size_t j = 0; j < 3; ++j) sparse_v[at[j]] = vals[j];

  struct expected_values {
    value_codec codec;
    unsigned wire;
    unsigned levels;
    float scale;
    std::vector<std::byte> bytes;
    std::vector<float> q;  // dequantized
  };
  const float s8 = 9.0f / 127.0f;
  const float s1 = static_cast<float>(17.0 / 3.0);
  const std::vector<expected_values> cases = {
      {{value_encoding::f64, 0}, 1, 0, 0.0f,
       le_bytes{}.u64(0x4000000000000000ull).u64(0xC018000000000000ull).u64(0x4022000000000000ull).b, vals},
      {{value_encoding::f32, 0}, 2, 0, 0.0f, le_bytes{}.u32(0x40000000u).u32(0xC0C00000u).u32(0x41100000u).b, vals},
      {{value_encoding::native, 0}, 2, 0, 0.0f, le_bytes{}.u32(0x40000000u).u32(0xC0C00000u).u32(0x41100000u).b, vals},
      {{value_encoding::f16, 0}, 3, 0, 0.0f, le_bytes{}.u16(0x4000).u16(0xC600).u16(0x4880).b, vals},
      {{value_encoding::bf16, 0}, 4, 0, 0.0f, le_bytes{}.u16(0x4000).u16(0xC0C0).u16(0x4110).b, vals},
      // codes round(v / s): 28.2 -> 28, -84.7 -> -85, 127
      {{value_encoding::i8, 0}, 5, 0, s8, le_bytes{}.u8(28).u8(0xAB).u8(127).b, {28 * s8, -85 * s8, 127 * s8}},
      // scale = mean |v| = 17/3; bit 1 (the negative value) set
      {{value_encoding::sign, 0}, 6, 0, s1, le_bytes{}.u8(0x02).b, {s1, -s1, s1}},
      // 5-bit codes level << 1 | sign: 4, 13, 18, packed LSB first: 0x49A4
      {{value_encoding::qsgd, 11}, 7, 11, 11.0f, le_bytes{}.u16(0x49A4).b, vals},
  };
  const auto raw = le_bytes{}.u32(1).u32(130).u32(299).b;
  const auto varint = le_bytes{}.u8(0x01).u8(0x80).u8(0x01).u8(0xA8).u8(0x01).b;  // 1, gaps 128 and 168

  for (const auto& c : cases) {
    INFO("value encoding " << to_string(c.codec.encoding));
    struct shape {
      any_compressor comp;
      std::span<const float> input;
      unsigned index_wire;
      std::uint32_t dim;
      std::vector<std::byte> index_section;
    };
    const std::vector<shape> shapes = {
        {identity{c.codec}, vals, 0, 3, {}},
        {top_k{k_spec::count(3), c.codec, index_encoding::raw_u32}, sparse_v, 1, d, raw},
        {top_k{k_spec::count(3), c.codec, index_encoding::delta_varint}, sparse_v, 2, d, varint},
        {top_k{k_spec::count(3), c.codec, index_encoding::automatic}, sparse_v, 2, d, varint},  // 5 < 12 bytes
    };
    for (const auto& sh : shapes) {
      INFO("index encoding " << sh.index_wire);
      const auto want = hand_message(sh.index_wire, c.wire, c.levels, sh.dim, 3, sh.index_section, c.scale, c.bytes);
      message m;
      compress(sh.comp, sh.input, m, {1, 2, 3});
      REQUIRE(encode(m) == want);
      REQUIRE(m.wire_bytes() == want.size());
      const message back = decode(want);
      REQUIRE(static_cast<unsigned>(back.index_enc) == sh.index_wire);
      REQUIRE(static_cast<unsigned>(back.value_enc) == c.wire);
      REQUIRE(back.count == 3);
      REQUIRE(back.dim == sh.dim);
      for (std::size_t j = 0; j < 3; ++j) {
        REQUIRE(back.index_of(j) == (sh.index_wire == 0 ? j : at[j]));
        REQUIRE(back.value_at<float>(j) == c.q[j]);
      }
      REQUIRE(encode(back) == want);
    }
  }
}

TEST_CASE("one enum per encoding: the wire encodings, and the settings native and automatic that never travel",
          "[message]") {
  STATIC_REQUIRE(static_cast<unsigned>(value_encoding::native) == 0);
  STATIC_REQUIRE(static_cast<unsigned>(value_encoding::f64) == 1);
  STATIC_REQUIRE(static_cast<unsigned>(value_encoding::qsgd) == 7);
  STATIC_REQUIRE(static_cast<unsigned>(index_encoding::delta_varint) == 2);
  STATIC_REQUIRE(static_cast<unsigned>(index_encoding::automatic) == 255);
  STATIC_REQUIRE(std::is_same_v<wire_values, value_encoding>);  // the 0.1 names
  STATIC_REQUIRE(std::is_same_v<wire_indices, index_encoding>);
  for (const auto w : {value_encoding::f64, value_encoding::f32, value_encoding::f16, value_encoding::bf16,
                       value_encoding::i8, value_encoding::sign, value_encoding::qsgd})
    REQUIRE(is_wire(w));
  for (const auto w : {index_encoding::dense, index_encoding::raw_u32, index_encoding::delta_varint,
                       index_encoding::seeded})
    REQUIRE(is_wire(w));
  STATIC_REQUIRE_FALSE(is_wire(value_encoding::native));
  STATIC_REQUIRE_FALSE(is_wire(index_encoding::automatic));
  STATIC_REQUIRE_FALSE(is_wire(static_cast<value_encoding>(8)));
  STATIC_REQUIRE_FALSE(is_wire(static_cast<index_encoding>(4)));
  REQUIRE(std::string(to_string(value_encoding::f16)) == "fp16");
  REQUIRE(std::string(to_string(index_encoding::delta_varint)) == "varint");
  REQUIRE(std::string(to_string(value_encoding::native)) == "native");
  REQUIRE(std::string(to_string(index_encoding::automatic)) == "auto");
  REQUIRE(payload_bytes(value_encoding::qsgd, 11, 3) == 2);
  REQUIRE(payload_bytes(value_encoding::f32, 0, 3) == 12);
  REQUIRE(payload_bytes(value_encoding::native, 0, 3) == 12);  // native counts as fp32
  REQUIRE(value_codec{}.wire_encoding<double>() == value_encoding::f64);
  REQUIRE(value_codec{}.wire_encoding<float>() == value_encoding::f32);
  REQUIRE(value_codec{value_encoding::bf16, 0}.wire_encoding<double>() == value_encoding::bf16);
}

TEST_CASE("a message carrying native or automatic is an error: encode, decode and validate refuse it", "[message]") {
  message m;
  m.dim = 8;
  m.count = 2;
  m.index_enc = index_encoding::raw_u32;
  m.value_enc = value_encoding::f32;
  m.indices = {1, 5};
  m.payload.assign(8, std::byte{0});
  REQUIRE_NOTHROW(validate(m, 8));
  const auto good = encode(m);
  REQUIRE(decode(good).indices == m.indices);

  message native = m;
  native.value_enc = value_encoding::native;
  message automatic = m;
  automatic.index_enc = index_encoding::automatic;
  std::vector<std::byte> out{std::byte{7}};
  REQUIRE_THROWS_AS(encode(native, out), message_error);
  REQUIRE_THROWS_WITH(encode(native), Catch::Contains("value encoding 0 (native) is a compressor setting"));
  REQUIRE_THROWS_AS(encode(automatic, out), message_error);
  REQUIRE_THROWS_WITH(encode(automatic), Catch::Contains("index encoding 255 (auto) is a compressor setting"));
  REQUIRE(out == std::vector<std::byte>{std::byte{7}});  // untouched
  REQUIRE_THROWS_AS(validate(native, 8), message_error);
  REQUIRE_THROWS_WITH(validate(native, 8), Catch::Contains("value encoding 0 (native)"));
  REQUIRE_THROWS_AS(validate(automatic, 8), message_error);
  REQUIRE_THROWS_WITH(validate(automatic, 8), Catch::Contains("index encoding 255 (auto)"));

  // the same bytes on the wire (byte 5: indices, byte 6: values), checksum correct
  le_bytes idx, vals;
  idx.u32(1).u32(5);
  vals.f32(0.0f).f32(0.0f);
  REQUIRE_NOTHROW(decode(hand_message(1, 2, 0, 8, 2, idx.b, 0.0f, vals.b)));
  REQUIRE_THROWS_WITH(decode(hand_message(1, 0, 0, 8, 2, idx.b, 0.0f, vals.b)),
                      Catch::Contains("value encoding 0 (native) is a compressor setting, not a wire encoding") &&
                          Catch::Contains("at byte 6"));
  REQUIRE_THROWS_WITH(decode(hand_message(255, 2, 0, 8, 2, idx.b, 0.0f, vals.b)),
                      Catch::Contains("index encoding 255 (auto) is a compressor setting, not a wire encoding") &&
                          Catch::Contains("at byte 5"));
}

TEST_CASE("seeded indices: 16 bytes of key on the wire, the receiver draws random-K's indices again",
          "[message]") {
  // independent: the sender's index set from the compressor (bitmap path), the wire bytes by hand
  const auto v = test::gaussian<float>(5000, 3);
  for (const std::size_t k : {std::size_t{1}, std::size_t{50}, std::size_t{700}, std::size_t{5000}}) {
    const context ctx{0x123456789ABCDEFull, 9, 77};
    message seeded, raw;
    compress(random_k{k_spec::count(k), false, {value_encoding::f32, 0}, index_encoding::seeded}, 
        std::span<const float>(v), seeded, ctx);
    compress(random_k{k_spec::count(k), false, {value_encoding::f32, 0}, index_encoding::raw_u32}, 
        std::span<const float>(v), raw, ctx);
    CAPTURE(k);
    REQUIRE(seeded.index_enc == index_encoding::seeded);
    REQUIRE(seeded.indices == raw.indices);
    REQUIRE(seeded.payload == raw.payload);
    REQUIRE(seeded.index_bytes() == 16);
    REQUIRE(seeded.wire_bytes() == message_header_bytes + 16 + 4 * k);
    REQUIRE(raw.wire_bytes() == message_header_bytes + 4 * k + 4 * k);
    const auto buf = encode(seeded);
    le_bytes values;
    for (std::size_t j = 0; j < k; ++j) values.f32(v[raw.indices[j]]);
    REQUIRE(buf == hand_message(3, 2, 0, 5000, static_cast<std::uint32_t>(k),
                                le_bytes{}.u64(0x123456789ABCDEFull).u32(9).u32(77).b, 0.0f, values.b));
    const message back = decode(buf);
    REQUIRE(back.indices == raw.indices);
    REQUIRE(back.index_key == index_stream_key{0x123456789ABCDEFull, 9, 77});
    REQUIRE(encode(back) == buf);
    std::vector<float> a(5000), b(5000);
    decompress(back, std::span<float>(a));
    decompress(raw, std::span<float>(b));
    REQUIRE(a == b);
  }
}

TEST_CASE("seeded indices: bad sections are errors, a huge announced dim costs O(count) memory", "[message]") {
  // a 12-byte key section
  REQUIRE_THROWS_WITH(decode(hand_message(3, 2, 0, 100, 0, le_bytes{}.u32(1).u32(2).u32(3).b, 0.0f, {})),
                      Catch::Contains("seeded index section of 12 bytes"));
  // unknown index encoding 4
  REQUIRE_THROWS_WITH(decode(hand_message(4, 2, 0, 100, 0, {}, 0.0f, {})), Catch::Contains("unknown index encoding 4"));
  // dim 2^32 - 1 with 3 values: decodes to 3 distinct ascending indices below dim, without a
  // bitmap of dim bits (512 MB)
  le_bytes vals;
  vals.f32(1.0f).f32(2.0f).f32(3.0f);
  const message m =
      decode(hand_message(3, 2, 0, 0xFFFFFFFFu, 3, le_bytes{}.u64(5).u32(0).u32(1).b, 0.0f, vals.b));
  REQUIRE(m.indices.size() == 3);
  REQUIRE(m.indices[0] < m.indices[1]);
  REQUIRE(m.indices[1] < m.indices[2]);
  // the compact (hash set) and bitmap draws agree: the same Floyd stream
  for (const std::size_t d : {std::size_t{1}, std::size_t{64}, std::size_t{1000}, std::size_t{100003}}) {
    std::vector<std::uint64_t> taken;
    std::vector<std::uint32_t> a, b;
    for (const std::size_t k : {std::size_t{0}, std::size_t{1}, d / 7, d / 2, d}) {
      detail::random_indices(d, k, 17, 3, 4, a, taken);
      detail::random_indices_compact(d, k, 17, 3, 4, b);
      CAPTURE(d, k);
      REQUIRE(a == b);
    }
  }
  // top-k and threshold cannot send seeded indices
  REQUIRE_THROWS_WITH(parse_compressor("top-k:0.01+seeded"), Catch::Contains("random-K's index stream"));
  REQUIRE_THROWS_WITH((top_k{k_spec::count(5), {}, index_encoding::seeded}.validate(100, {})),
                      Catch::Contains("random-K's only"));
  const auto v = test::gaussian<float>(100, 1);
  message out;
  const threshold_k th{k_spec::count(5), 256, {}, index_encoding::seeded};
  REQUIRE_THROWS_AS(compress(th, std::span<const float>(v), out, {}), config_error);
}
