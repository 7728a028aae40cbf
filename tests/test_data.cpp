// Tests of sparsepush/data/*: the IDX reader on files written here (plain and gzip), its errors,
// Debian's Fashion-MNIST files, and the IID / skewed-label / Dirichlet partitions.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <chrono>
#include <filesystem>
#include <future>
#include <thread>
#include <fstream>
#include <numeric>
#include <set>
#include <sparsepush/data/idx.hpp>
#include <sparsepush/data/partition.hpp>

#include "fifo_watchdog.hpp"

using namespace sparsepush;

namespace {
std::vector<unsigned char> be32(std::uint32_t v) {
  return {static_cast<unsigned char>(v >> 24), static_cast<unsigned char>(v >> 16), static_cast<unsigned char>(v >> 8),
          static_cast<unsigned char>(v)};
}
std::vector<unsigned char> image_file(std::uint32_t magic, std::uint32_t count, std::uint32_t rows, std::uint32_t cols,
                                      std::size_t pixel_bytes) {
  std::vector<unsigned char> f;
  for (auto v : {magic, count, rows, cols}) {
    const auto b = be32(v);
    f.insert(f.end(), b.begin(), b.end());
  }
  for (std::size_t i = 0; i < pixel_bytes; ++i) f.push_back(static_cast<unsigned char>((i * 37) & 0xFF));
  return f;
}
std::vector<unsigned char> label_file(std::uint32_t count, std::size_t bytes, unsigned classes = 10) {
  std::vector<unsigned char> f;
  for (auto v : {0x801u, count}) {
    const auto b = be32(v);
    f.insert(f.end(), b.begin(), b.end());
  }
  for (std::size_t i = 0; i < bytes; ++i) f.push_back(static_cast<unsigned char>(i % classes));
  return f;
}
std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / "sparsepush-test-data";
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}
std::string write_plain(const std::string& name, const std::vector<unsigned char>& bytes) {
  const auto p = temp_path(name);
  std::ofstream(p, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  return p;
}
std::string write_gz(const std::string& name, const std::vector<unsigned char>& bytes) {
  const auto p = temp_path(name);
  gzFile f = gzopen(p.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())) == static_cast<int>(bytes.size()));
  gzclose(f);
  return p;
}

}  // namespace

TEST_CASE("IDX images and labels round-trip, plain and gzip", "[data]") {
  const auto img = image_file(0x803, 3, 4, 5, 60);
  const auto lab = label_file(3, 3);
  for (bool gz : {false, true}) {
    const auto ip = gz ? write_gz("img.gz", img) : write_plain("img", img);
    const auto lp = gz ? write_gz("lab.gz", lab) : write_plain("lab", lab);
    const auto im = read_idx_images(ip);
    REQUIRE(im.count == 3);
    REQUIRE(im.rows == 4);
    REQUIRE(im.cols == 5);
    REQUIRE(std::equal(im.pixels.begin(), im.pixels.end(), img.begin() + 16));
    const auto set = load_labelled(ip, lp);
    REQUIRE(set.labels == std::vector<std::uint8_t>{0, 1, 2});
    REQUIRE(set.pixels[1] == Approx(37.0f / 255.0f));
  }
}

TEST_CASE("IDX reader rejects truncated, malformed and mismatched files", "[data]") {
  const auto img = image_file(0x803, 2, 3, 3, 18);
  for (std::size_t cut = 0; cut < img.size(); ++cut) {
    const std::vector<unsigned char> part(img.begin(), img.begin() + static_cast<std::ptrdiff_t>(cut));
    const auto p = write_gz("cut.gz", part);
    REQUIRE_THROWS_AS(read_idx_images(p), data_error);
  }
  REQUIRE_THROWS_WITH(read_idx_images(write_gz("cut2.gz", std::vector<unsigned char>(img.begin(), img.end() - 1))),
                      Catch::Contains("truncated") && Catch::Contains("pixels"));
  REQUIRE_THROWS_WITH(read_idx_images(write_plain("magic", image_file(0x801, 2, 3, 3, 18))),
                      Catch::Contains("bad magic number 2049"));
  REQUIRE_THROWS_WITH(read_idx_labels(write_plain("lmagic", image_file(0x803, 2, 3, 3, 18))),
                      Catch::Contains("bad magic number 2051"));
  auto longer = img;
  longer.push_back(0);
  REQUIRE_THROWS_WITH(read_idx_images(write_plain("long", longer)),
                      Catch::EndsWith("long: 1 bytes after the 2 images of 3x3 the header announces (is the header's "
                                      "image count or size wrong?)"));
  {  // 27 rows announced over 28 rows' worth of pixels: the message names the header's size
    const auto p = write_gz("rows27.gz", image_file(0x803, 10, 27, 28, 10 * 28 * 28));
    REQUIRE_THROWS_WITH(read_idx_images(p), "sparsepush: " + p + ": 280 bytes after the 10 images of 27x28 the header "
                                            "announces (is the header's image count or size wrong?)");
    auto labels = label_file(10, 10);
    labels.push_back(3);
    const auto lp = write_plain("labels-long", labels);
    REQUIRE_THROWS_WITH(read_idx_labels(lp), "sparsepush: " + lp + ": 1 bytes after the 10 labels the header announces "
                                             "(is the header's label count wrong?)");
  }
  REQUIRE_THROWS_WITH(read_idx_images(write_plain("zero", image_file(0x803, 2, 0, 3, 0))), Catch::Contains("implausible"));
  {  // a header that announces 2^31 one-pixel images over 18 bytes: "truncated", without first
     // allocating the 2 GiB it announces (peak memory grows by at most the 16 MiB read step)
    rusage before{}, after{};
    getrusage(RUSAGE_SELF, &before);
    REQUIRE_THROWS_WITH(read_idx_images(write_plain("huge", image_file(0x803, 0x80000000u, 1, 1, 18))),
                        Catch::Contains("truncated") && Catch::Contains("2147483648 bytes"));
    getrusage(RUSAGE_SELF, &after);
    REQUIRE(after.ru_maxrss - before.ru_maxrss < 100 * 1024);  // kilobytes
  }
  REQUIRE_THROWS_WITH(read_idx_images(write_plain("cap", image_file(0x803, 0xFFFFFFFFu, 4096, 4096, 18))),
                      Catch::Contains("more than the 16 GiB"));
  REQUIRE_THROWS_WITH(read_idx_images(temp_path("does-not-exist.gz")),
                      Catch::Contains("does-not-exist.gz") && Catch::Contains("does not exist"));
  const auto ip = write_plain("img2", img);
  REQUIRE_THROWS_WITH(load_labelled(ip, write_plain("lab3", label_file(3, 3))),
                      Catch::Contains("2 images but") && Catch::Contains("3 labels"));
  REQUIRE_THROWS_WITH(load_labelled(ip, write_plain("lab12", label_file(2, 2, 12)), 1),
                      Catch::Contains("label 1 of sample 1"));
  REQUIRE_THROWS_WITH(load_fashion_mnist(temp_path("no-such-dir")), Catch::Contains("--data DIR"));
  REQUIRE_THROWS_WITH(read_idx_images(temp_path("")), Catch::Contains("is not a regular file (a directory)"));
}

TEST_CASE("IDX reader: a FIFO, a name too long and a symbolic-link loop are data errors, never a hang", "[data]") {
  const std::string fifo = temp_path("images.fifo");
  std::filesystem::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  CHECK(test::with_fifo_watchdog(fifo, [&] { read_idx_images(fifo); }) == "sparsepush: " + fifo + " is not a regular file (a FIFO)");
  CHECK(test::with_fifo_watchdog(fifo, [&] { read_idx_labels(fifo); }) == "sparsepush: " + fifo + " is not a regular file (a FIFO)");
  std::filesystem::remove(fifo);
  const std::string longname = temp_path(std::string(300, 'a'));
  REQUIRE_THROWS_AS(read_idx_images(longname), data_error);
  REQUIRE_THROWS_WITH(load_fashion_mnist(longname), Catch::Contains(longname) && Catch::Contains("File name too long"));
  const std::string loop = temp_path("loop");
  std::filesystem::remove(loop);
  std::filesystem::create_symlink("loop", loop);
  REQUIRE_THROWS_WITH(read_idx_images(loop), Catch::Contains(loop) && Catch::Contains("symbolic links"));
  REQUIRE_THROWS_WITH(load_fashion_mnist(loop), Catch::Contains(loop) && Catch::Contains("symbolic links"));
  std::filesystem::remove(loop);
}

TEST_CASE("Debian's Fashion-MNIST loads: 60000 + 10000 images of 28x28, 10 balanced classes", "[data]") {
  const auto fm = load_fashion_mnist();
  REQUIRE(fm.train.count == 60000);
  REQUIRE(fm.test.count == 10000);
  REQUIRE(fm.train.rows == 28);
  REQUIRE(fm.train.cols == 28);
  std::vector<int> hist(10, 0);
  for (auto l : fm.train.labels) ++hist[l];
  for (int h : hist) REQUIRE(h == 6000);
  float lo = 1, hi = 0;
  for (float p : fm.test.pixels) lo = std::min(lo, p), hi = std::max(hi, p);
  REQUIRE(lo == 0.0f);
  REQUIRE(hi == 1.0f);
}

namespace {
std::vector<std::uint8_t> synthetic_labels(std::size_t per_class, unsigned classes = 10) {
  std::vector<std::uint8_t> l;
  for (std::size_t i = 0; i < per_class * classes; ++i) l.push_back(static_cast<std::uint8_t>((i * 7) % classes));
  return l;
}
void require_exact_cover(const partition& p, std::size_t samples) {
  std::vector<int> seen(samples, 0);
  for (const auto& node : p)
    for (auto i : node) {
      REQUIRE(i < samples);
      ++seen[i];
    }
  for (int s : seen) REQUIRE(s == 1);
}
std::vector<std::vector<int>> histograms(const partition& p, const std::vector<std::uint8_t>& labels) {
  std::vector<std::vector<int>> h(p.size(), std::vector<int>(10, 0));
  for (std::size_t i = 0; i < p.size(); ++i)
    for (auto s : p[i]) ++h[i][labels[s]];
  return h;
}
}  // namespace

TEST_CASE("partitions assign every sample exactly once and are reproducible", "[data]") {
  const auto labels = synthetic_labels(300);
  for (std::size_t n : {1u, 3u, 8u, 16u}) {
    require_exact_cover(partition_iid(labels, n, 1), labels.size());
    for (double s : {0.0, 0.5, 0.8, 1.0}) require_exact_cover(partition_skewed(labels, n, s, 2), labels.size());
    for (double a : {0.05, 1.0, 100.0}) require_exact_cover(partition_dirichlet(labels, n, a, 3), labels.size());
  }
  REQUIRE(partition_skewed(labels, 8, 0.8, 5) == partition_skewed(labels, 8, 0.8, 5));
  REQUIRE(partition_skewed(labels, 8, 0.8, 5) != partition_skewed(labels, 8, 0.8, 6));
  REQUIRE(partition_dirichlet(labels, 8, 0.5, 5) == partition_dirichlet(labels, 8, 0.5, 5));
  const auto iid = partition_iid(labels, 7, 9);
  for (const auto& node : iid) REQUIRE((node.size() == 428 || node.size() == 429));
  REQUIRE_THROWS_WITH(partition_skewed(labels, 8, 1.5, 1), Catch::Contains("skew must be in [0, 1]"));
  REQUIRE_THROWS_WITH(partition_dirichlet(labels, 8, 0.0, 1), Catch::Contains("alpha"));
  REQUIRE_THROWS_WITH(partition_iid(std::vector<std::uint8_t>(3), 4, 1), Catch::Contains("fewer samples than nodes"));
}

TEST_CASE("skewed partition: label histograms follow the definition", "[data]") {
  const std::size_t per = 600, n = 8;
  const auto labels = synthetic_labels(per);
  for (double s : {0.0, 0.5, 0.8, 1.0}) {
    const auto h = histograms(partition_skewed(labels, n, s, 11), labels);
    // Independent expectation: the sorted part holds round(s * 600) of each class in label order,
    // cut into n equal contiguous chunks; the rest (600 - take per class) is spread at random.
    const std::size_t take = static_cast<std::size_t>(std::llround(s * per)), pool = take * 10;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t c = 0; c < 10; ++c) {
        const std::size_t lo = i * pool / n, hi = (i + 1) * pool / n;  // chunk [lo, hi) of the pool
        const std::size_t cls_lo = c * take, cls_hi = (c + 1) * take;
        const double sorted = static_cast<double>(std::max<std::ptrdiff_t>(
            0, static_cast<std::ptrdiff_t>(std::min(hi, cls_hi)) - static_cast<std::ptrdiff_t>(std::max(lo, cls_lo))));
        const double spread = static_cast<double>(per - take) / n;
        const double sd = std::sqrt(spread * (1.0 - 1.0 / n));
        INFO("s " << s << " node " << i << " class " << c);
        REQUIRE(std::abs(h[i][c] - sorted - spread) <= 6 * sd + 1.0);
      }
  }
}

TEST_CASE("Dirichlet: large alpha approaches IID, small alpha concentrates labels", "[data]") {
  const auto labels = synthetic_labels(1000);
  const auto near_iid = histograms(partition_dirichlet(labels, 5, 1e4, 3), labels);
  for (const auto& node : near_iid)
    for (int c : node) REQUIRE(std::abs(c - 200) < 40);
  const auto skewed = histograms(partition_dirichlet(labels, 5, 0.05, 3), labels);
  double top_share = 0;
  int nonempty = 0;
  for (const auto& node : skewed) {
    const int total = std::accumulate(node.begin(), node.end(), 0);
    if (total == 0) continue;
    ++nonempty;
    top_share += static_cast<double>(*std::max_element(node.begin(), node.end())) / total;
  }
  REQUIRE(top_share / nonempty > 0.5);
}
