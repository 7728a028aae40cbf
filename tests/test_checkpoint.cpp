// Tests of sparsepush/checkpoint.hpp and the save/restore of nodes and algorithms: the frame
// layout and CRC (checked with zlib), every truncation and every flipped byte an error, a save
// restored into a fresh algorithm continues bit for bit (SP with loss, SCSP, CHOCO, centralized),
// and a mismatched or corrupted checkpoint changes nothing; a FIFO where a checkpoint file is
// meant is refused at once, never waited on.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <thread>
#include <sparsepush/sparsepush.hpp>

#include "fifo_watchdog.hpp"
#include "test_util.hpp"

using namespace sparsepush;

namespace {
using vec = std::vector<double>;

std::uint64_t read_le(const std::vector<std::byte>& b, std::size_t at, std::size_t n) {
  std::uint64_t v = 0;
  for (std::size_t i = 0; i < n; ++i) v |= std::to_integer<std::uint64_t>(b[at + i]) << (8 * i);
  return v;
}

/// Offset of the first (or last) occurrence of a 4-character section tag in a file.
std::size_t find_tag(const std::vector<std::byte>& f, const char* tag, bool last = false) {
  std::size_t at = f.size();
  for (std::size_t i = 0; i + 4 <= f.size(); ++i)
    if (std::memcmp(f.data() + i, tag, 4) == 0) {
      at = i;
      if (!last) break;
    }
  REQUIRE(at < f.size());
  return at;
}

std::vector<std::byte> sample_file() {
  checkpoint_writer w;
  w.section("TEST");
  w.u32(7);
  w.u64(1ull << 40);
  w.f64(-2.5);
  w.str("hello");
  w.values(std::vector<float>{1.0f, -0.5f, 3.25f});
  w.values(std::vector<std::uint32_t>{});
  return w.finish();
}

const gradient_oracle<double> quad = [](std::uint32_t i, std::uint32_t t, std::span<const double> x,
                                        std::span<double> g) {
  for (std::size_t l = 0; l < x.size(); ++l) g[l] = x[l] - std::sin(double(l + 1) * double(i + 1) + 0.01 * t);
};

std::vector<vec> models(std::size_t n, std::size_t d) {
  std::vector<vec> x;
  for (std::size_t i = 0; i < n; ++i) x.push_back(test::gaussian<double>(d, 70 + static_cast<unsigned>(i)));
  return x;
}

template <class A>
void require_same_models(const A& a, const A& b) {
  REQUIRE(a.num_nodes() == b.num_nodes());
  for (std::size_t i = 0; i < a.num_nodes(); ++i) {
    const auto ma = a.model(i), mb = b.model(i);
    REQUIRE(std::memcmp(ma.data(), mb.data(), ma.size() * sizeof(double)) == 0);
  }
  REQUIRE(a.bytes_sent() == b.bytes_sent());
  REQUIRE(a.messages_sent() == b.messages_sent());
}
}  // namespace

TEST_CASE("checkpoint frame: magic, version, length and a zlib-checked CRC-32, fields read back", "[checkpoint]") {
  const auto f = sample_file();
  REQUIRE(std::memcmp(f.data(), "SPCKPT\r\n", 8) == 0);
  REQUIRE(read_le(f, 8, 4) == checkpoint_version);
  const auto len = read_le(f, 12, 8);
  REQUIRE(len + checkpoint_overhead == f.size());
  const auto crc = ::crc32(0L, reinterpret_cast<const Bytef*>(f.data()), static_cast<uInt>(20 + len));
  REQUIRE(read_le(f, 20 + len, 4) == crc);

  checkpoint_reader r(f, "sample");
  r.section("TEST");
  REQUIRE(r.u32("a") == 7);
  REQUIRE(r.u64("b") == (1ull << 40));
  REQUIRE(r.f64("c") == -2.5);
  REQUIRE(r.str("d") == "hello");
  std::vector<float> v(3);
  r.values(std::span<float>(v), "e");
  REQUIRE(v == std::vector<float>{1.0f, -0.5f, 3.25f});
  REQUIRE(r.values<std::uint32_t>("f", 10).empty());
  r.done();
}

TEST_CASE("every truncation and every flipped byte of a checkpoint is a checkpoint_error", "[checkpoint]") {
  const auto f = sample_file();
  for (std::size_t len = 0; len < f.size(); ++len) {
    const std::vector<std::byte> cut(f.begin(), f.begin() + static_cast<std::ptrdiff_t>(len));
    REQUIRE_THROWS_AS(checkpoint_reader(cut), checkpoint_error);
  }
  for (std::size_t at = 0; at < f.size(); ++at) {
    auto bad = f;
    bad[at] ^= std::byte{0x10};
    REQUIRE_THROWS_AS(checkpoint_reader(bad), checkpoint_error);
  }
  // wrong tag, wrong element size, too many elements, unread bytes: errors that name the field
  checkpoint_reader r(f, "sample");
  REQUIRE_THROWS_WITH(r.section("NOPE"), Catch::Contains("where 'NOPE' was expected"));
  checkpoint_reader r2(f, "sample");
  r2.section("TEST");
  r2.u32("a");
  r2.u64("b");
  r2.f64("c");
  r2.str("d");
  std::vector<double> wrong(3);
  REQUIRE_THROWS_WITH(r2.values(std::span<double>(wrong), "e"), Catch::Contains("4-byte elements"));
  checkpoint_reader r3(f, "sample");
  r3.section("TEST");
  REQUIRE_THROWS_WITH(r3.done(), Catch::Contains("unread bytes"));
}

TEST_CASE("write_file_atomic replaces a file whole and read_file_bytes names what is wrong", "[checkpoint]") {
  const auto dir = std::filesystem::temp_directory_path() / "sparsepush-ckpt-test";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "a.ckpt").string();
  const auto f = sample_file();
  write_file_atomic(path, f);
  write_file_atomic(path, f);  // over an existing file
  REQUIRE(read_file_bytes(path) == f);
  REQUIRE_FALSE(std::filesystem::exists(path + ".tmp"));
  REQUIRE_THROWS_WITH(read_file_bytes((dir / "missing").string()), Catch::Contains("cannot open"));
  REQUIRE_THROWS_WITH(read_file_bytes(dir.string()), Catch::Contains("not a regular file"));
  REQUIRE_THROWS_WITH(read_file_bytes(path, 10), Catch::Contains("more than the 10"));
  REQUIRE_THROWS_AS(write_file_atomic((dir / "no" / "such" / "dir").string(), f), checkpoint_error);
  REQUIRE_THROWS_WITH(read_file_bytes(dir.string()), Catch::Contains(dir.string() + " is not a regular file (a directory)"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("a FIFO where a checkpoint file is meant is refused at once, not waited on", "[checkpoint]") {
  const auto dir = std::filesystem::temp_directory_path() / "sparsepush-ckpt-fifo";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  // a rank file (or a manifest) that is a FIFO: a plain open() waits for a writer forever
  const std::string rank_file = (dir / "round-5.rank-0.ckpt").string();
  REQUIRE(::mkfifo(rank_file.c_str(), 0644) == 0);
  CHECK(test::with_fifo_watchdog(rank_file, [&] { read_file_bytes(rank_file); }) ==
        "sparsepush: " + rank_file + " is not a regular file (a FIFO)");
  // a FIFO left where write_file_atomic puts its temporary file: replaced, not opened
  const std::string target = (dir / "manifest").string();
  REQUIRE(::mkfifo((target + ".tmp").c_str(), 0644) == 0);
  const auto f = sample_file();
  CHECK(test::with_fifo_watchdog(target + ".tmp", [&] { write_file_atomic(target, f); }) == "no error");
  CHECK(read_file_bytes(target) == f);
  CHECK_FALSE(std::filesystem::exists(target + ".tmp"));
  std::filesystem::remove_all(dir);
}

TEST_CASE("Sparse-Push restored from a checkpoint continues bit for bit (loss, SCSP phases)", "[checkpoint]") {
  const std::size_t n = 8, d = 120;
  const auto sched = parse_schedule("exponential", n);
  const auto phases = scsp_phases(parse_compressor("top-k:0.1+int8"), 0.2, 30, 6);
  const sparse_push_options opt{.seed = 4, .network = {.drop_probability = 0.2, .seed = 8},
                                .recovery = loss_recovery::acknowledged};
  sparse_push<double> full(models(n, d), sched, phases, opt);
  sparse_push<double> part(models(n, d), sched, phases, opt);
  for (std::uint32_t t = 0; t < 17; ++t) {
    full.round(t, quad, 0.05);
    part.round(t, quad, 0.05);
  }
  checkpoint_writer w;
  part.save(w);
  const auto file = w.finish();
  for (std::uint32_t t = 17; t < 36; ++t) full.round(t, quad, 0.05);

  sparse_push<double> resumed(models(n, d), sched, phases, opt);
  checkpoint_reader r(file);
  resumed.restore(r);
  r.done();
  for (std::uint32_t t = 17; t < 36; ++t) resumed.round(t, quad, 0.05);
  require_same_models(full, resumed);
  REQUIRE(resumed.messages_dropped() == full.messages_dropped());
  REQUIRE(resumed.weight_mass() == full.weight_mass());
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(resumed.group().u(i) == full.group().u(i));
    const auto ea = resumed.group().residual(i), eb = full.group().residual(i);
    REQUIRE(std::memcmp(ea.data(), eb.data(), d * sizeof(double)) == 0);
  }
}

TEST_CASE("CHOCO-SGD and centralized restored from a checkpoint continue bit for bit", "[checkpoint]") {
  const std::size_t n = 6, d = 50;
  const auto sched = parse_schedule("undirected-ring", n);
  for (const auto form : {choco_form::weighted_sum, choco_form::per_neighbour}) {
    const choco_options opt{.consensus_step = 0.4, .compressor = parse_compressor("top-k:0.2"), .form = form, .seed = 2};
    choco<double> full(models(n, d), sched, opt), resumed(models(n, d), sched, opt);
    for (std::uint32_t t = 0; t < 10; ++t) full.round(t, quad, 0.05);
    checkpoint_writer w;
    full.save(w);
    const auto file = w.finish();
    for (std::uint32_t t = 10; t < 20; ++t) full.round(t, quad, 0.05);
    checkpoint_reader r(file);
    resumed.restore(r);
    r.done();
    for (std::uint32_t t = 10; t < 20; ++t) resumed.round(t, quad, 0.05);
    require_same_models(full, resumed);
  }
  centralized<double> c1(vec(d, 0.5), n), c2(vec(d, 0.5), n);
  for (std::uint32_t t = 0; t < 5; ++t) c1.round(t, quad, 0.1);
  checkpoint_writer w;
  c1.save(w);
  const auto file = w.finish();
  for (std::uint32_t t = 5; t < 9; ++t) c1.round(t, quad, 0.1);
  checkpoint_reader r(file);
  c2.restore(r);
  for (std::uint32_t t = 5; t < 9; ++t) c2.round(t, quad, 0.1);
  REQUIRE(c1.model(0) == c2.model(0));
  REQUIRE(c1.bytes_sent() == c2.bytes_sent());
}

TEST_CASE("a mismatched or corrupted checkpoint is an error and changes nothing", "[checkpoint]") {
  const std::size_t n = 4, d = 40;
  const auto phases = sparse_push_phases(parse_compressor("top-k:0.25"), 0.5);
  sparse_push<double> a(models(n, d), parse_schedule("time-varying-ring", n), phases);
  for (std::uint32_t t = 0; t < 5; ++t) a.round(t, quad, 0.05);
  checkpoint_writer w;
  a.save(w);
  const auto good = w.finish();

  sparse_push<double> other(models(n, d), parse_schedule("time-varying-ring", n), phases);
  other.round(0, quad, 0.05);
  auto snapshot = [&] {
    std::vector<vec> m;
    for (std::size_t i = 0; i < n; ++i) m.push_back(other.model(i));
    return std::make_pair(m, other.bytes_sent());
  };
  const auto before = snapshot();

  // other node count, other dimension
  sparse_push<double> five(models(5, d), parse_schedule("time-varying-ring", 5), phases);
  checkpoint_reader r5(good);
  REQUIRE_THROWS_WITH(five.restore(r5), Catch::Contains("holds nodes [0, 4) of 4"));
  sparse_push<double> wide(models(n, d + 1), parse_schedule("time-varying-ring", n), phases);
  checkpoint_reader rw(good);
  REQUIRE_THROWS_WITH(wide.restore(rw), Catch::Contains("parameters, the model has 41"));

  // a payload mutated with its CRC fixed up: NaN in the last node's x, a bad ledger, a bad u
  auto with_crc = [](std::vector<std::byte> f) {
    const std::size_t len = f.size() - checkpoint_overhead;
    const auto crc = ::crc32(0L, reinterpret_cast<const Bytef*>(f.data()), static_cast<uInt>(20 + len));
    for (std::size_t i = 0; i < 4; ++i) f[20 + len + i] = static_cast<std::byte>((crc >> (8 * i)) & 0xFF);
    return f;
  };
  {
    auto bad = good;
    // the ledger's node count: 8 bytes after its first-node field, which follows the tag
    bad[find_tag(bad, "LDGR") + 4 + 8] = std::byte{99};
    const auto file = with_crc(bad);
    checkpoint_reader r(file);
    REQUIRE_THROWS_WITH(other.restore(r), Catch::Contains("byte ledger of nodes"));
  }
  {
    auto bad = good;
    const double nan = std::numeric_limits<double>::quiet_NaN();
    // the last node's first x value: tag, id u32, dim u64, u f64, residual flag u32, count u64, size u8
    const std::size_t x_last = find_tag(bad, "NODE", true) + 4 + 4 + 8 + 8 + 4 + 8 + 1;
    std::memcpy(bad.data() + x_last, &nan, 8);
    const auto file = with_crc(bad);
    checkpoint_reader r(file);
    REQUIRE_THROWS_WITH(other.restore(r), Catch::Contains("NaN or Inf"));
  }
  const auto after = snapshot();
  REQUIRE(after.second == before.second);
  for (std::size_t i = 0; i < n; ++i)
    REQUIRE(std::memcmp(after.first[i].data(), before.first[i].data(), d * sizeof(double)) == 0);
}
