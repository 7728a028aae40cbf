// Tests of the counter-based generator (detail/philox.hpp) against Random123, and of CRC-32
// (detail/crc32.hpp) against zlib: both are independent implementations.
#include <Random123/philox.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <random>
#include <sparsepush/detail/crc32.hpp>
#include <sparsepush/detail/philox.hpp>
#include <vector>

using namespace sparsepush;

TEST_CASE("Philox4x32-10 matches Random123 bit for bit", "[compress]") {
  std::mt19937_64 gen(12345);
  r123::Philox4x32 ref;
  for (int trial = 0; trial < 2000; ++trial) {
    r123::Philox4x32::ctr_type c;
    r123::Philox4x32::key_type k;
    detail::philox_counter ours_c{};
    detail::philox_key ours_k{};
    for (int i = 0; i < 4; ++i) c.v[i] = ours_c[i] = static_cast<std::uint32_t>(gen());
    for (int i = 0; i < 2; ++i) k.v[i] = ours_k[i] = static_cast<std::uint32_t>(gen());
    const auto r = ref(c, k);
    const auto o = detail::philox4x32_10(ours_c, ours_k);
    for (int i = 0; i < 4; ++i) REQUIRE(r.v[i] == o[i]);
  }
}

TEST_CASE("counter_rng is a pure function of (seed, node, round, stream, position)", "[compress]") {
  const detail::counter_rng a(7, 3, 11, detail::rng_stream::qsgd);
  const detail::counter_rng same(7, 3, 11, detail::rng_stream::qsgd);
  const detail::counter_rng other_node(7, 4, 11, detail::rng_stream::qsgd);
  const detail::counter_rng other_round(7, 3, 12, detail::rng_stream::qsgd);
  const detail::counter_rng other_stream(7, 3, 11, detail::rng_stream::random_k);
  int differ_node = 0, differ_round = 0, differ_stream = 0;
  for (std::uint32_t i = 0; i < 1000; ++i) {
    REQUIRE(a.block(i) == same.block(i));
    differ_node += a.block(i) != other_node.block(i);
    differ_round += a.block(i) != other_round.block(i);
    differ_stream += a.block(i) != other_stream.block(i);
  }
  REQUIRE(differ_node == 1000);
  REQUIRE(differ_round == 1000);
  REQUIRE(differ_stream == 1000);
}

TEST_CASE("uniform_int stays in range and is close to uniform", "[compress]") {
  const detail::counter_rng rng(99, 0, 0, detail::rng_stream::random_k);
  std::vector<int> hist(10, 0);
  const int n = 100000;
  for (std::uint32_t i = 0; i < static_cast<std::uint32_t>(n); ++i) {
    const auto v = rng.uniform_int(i, 9);
    REQUIRE(v <= 9);
    ++hist[v];
  }
  // each bin ~ Binomial(n, 0.1): sd ~ 95; 6 sd bound fails for a broken mapping
  for (int h : hist) REQUIRE(std::abs(h - n / 10) < 600);
  REQUIRE(rng.uniform_int(5, 0) == 0);
  for (std::uint32_t i = 0; i < 1000; ++i) REQUIRE(rng.uniform_int(i, 0xFFFFFFFFu) <= 0xFFFFFFFFu);
}

TEST_CASE("CRC-32 matches zlib on random buffers of every length up to 300", "[message]") {
  std::mt19937 gen(5);
  std::vector<std::byte> buf;
  for (std::size_t len = 0; len <= 300; ++len) {
    buf.resize(len);
    for (auto& b : buf) b = std::byte(gen() & 0xFF);
    const auto ours = detail::crc32_update(0, buf);
    const auto ref = ::crc32(0L, reinterpret_cast<const Bytef*>(buf.data()), static_cast<uInt>(len));
    REQUIRE(ours == ref);
    // chaining over a split equals one pass
    const std::size_t cut = len / 3;
    const auto chained = detail::crc32_update(detail::crc32_update(0, std::span(buf).first(cut)),
                                              std::span(buf).subspan(cut));
    REQUIRE(chained == ref);
  }
}
