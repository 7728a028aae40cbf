// Writes the seed corpus of the fuzz targets: real encoded messages and envelopes of every value
// and index encoding, valid compressor and schedule specs with vectors and sizes that reach
// their different paths, tiny IDX files (plain, gzip, truncated, mismatched), and real
// checkpoints of the shapes the checkpoint target restores into. Run it after a
// change of the wire format or of an input layout (fuzz_inputs.hpp) and commit the result:
//   fuzz_make_corpus tests/fuzz/corpus
#include <zlib.h>

#include <cctype>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include <sparsepush/compress/compose.hpp>
#include <sparsepush/transport/endpoint.hpp>

#include "fuzz_checkpoint_setup.hpp"
#include "fuzz_inputs.hpp"

namespace fs = std::filesystem;
using namespace sparsepush;
using sparsepush_fuzz::compress_input;
using sparsepush_fuzz::idx_input;
using sparsepush_fuzz::schedule_input;

namespace {

fs::path root;
std::size_t written = 0;

void save(const std::string& dir, std::string name, std::span<const std::uint8_t> bytes) {
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  fs::create_directories(root / dir);
  std::ofstream out(root / dir / name, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + (root / dir / name).string());
  ++written;
}
void save(const std::string& dir, const std::string& name, std::span<const std::byte> bytes) {
  save(dir, name, std::span<const std::uint8_t>(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
}

/// Deterministic bytes (a 64-bit LCG), so that the corpus is the same on every run.
std::vector<std::uint8_t> noise(std::size_t n, std::uint64_t seed) {
  std::vector<std::uint8_t> out(n);
  for (auto& b : out) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<std::uint8_t>(seed >> 56);
  }
  return out;
}

std::vector<float> vector_of(std::size_t d, std::uint64_t seed) {
  const auto bytes = noise(2 * d, seed);
  std::vector<float> v(d);
  for (std::size_t i = 0; i < d; ++i)
    v[i] = static_cast<float>(static_cast<std::int16_t>(bytes[2 * i] | (bytes[2 * i + 1] << 8))) / 4096.0f;
  return v;
}

void decode_seeds() {
  const char* specs[] = {"identity+fp64", "identity+fp32", "identity+fp16", "identity+bf16", "identity+int8",
                         "identity+sign", "identity+qsgd:3", "qsgd:16", "sign", "top-k:0.2+u32",
                         "top-k:0.2+varint", "top-k:0.05+int8", "random-k:0.3+qsgd:300+varint",
                         "random-k-unbiased:2+bf16+u32", "threshold:0.1+fp16", "random-k:0.3+seeded",
                         "random-k-unbiased:0.5+int8+seeded"};
  std::uint64_t seed = 1;
  for (const char* spec : specs)
    for (const std::size_t d : {std::size_t{1}, std::size_t{37}, std::size_t{300}}) {
      const any_compressor c = parse_compressor(spec);
      const context ctx{seed, 2, 5};
      try {
        c.validate(d, ctx);
      } catch (const config_error&) {
        continue;  // a count k above d
      }
      const auto v = vector_of(d, seed++);
      message m;
      sparsepush::compress(c, std::span<const float>(v), m, ctx);
      const std::string name = std::string(spec) + "-d" + std::to_string(d);
      const auto bytes = encode(m);
      save("decode", name + ".msg", bytes);
      save("decode_crc", name + ".msg", bytes);
      if (d == 37) {
        std::vector<std::byte> frame;
        encode_envelope({3, 17, 0.25, 1.5}, m, frame);
        save("decode", name + ".env", frame);
        save("decode_crc", name + ".env", frame);
      }
    }
}

void compress_seeds() {
  struct seed_case {
    const char* spec;
    std::uint32_t d;
    std::uint8_t flags;
  };
  // flags: bit 0 double, bit 1 raw float bits, bit 2 error feedback, bits 3..7 exponent (16: 2^-8)
  const seed_case cases[] = {
      {"identity", 64, 16 << 3},       {"identity+fp64", 50, 1 | 16 << 3},      {"identity+fp16", 40, 20 << 3},
      {"identity+bf16", 40, 4 | 16 << 3}, {"identity+int8", 100, 16 << 3},     {"identity+sign", 33, 1 | 16 << 3},
      {"identity+qsgd:5", 70, 4 | 16 << 3}, {"qsgd:16", 128, 1 | 4 | 16 << 3}, {"qsgd:32767", 20, 2},
      {"sign", 90, 4 | 16 << 3},        {"identity", 9, 2 | 1},                    {"top-k:0.01", 3000, 4 | 16 << 3},
      {"top-k:0.1+int8", 500, 1 | 4 | 16 << 3}, {"top-k:5+u32", 64, 16 << 3},  {"top-k:0.05+varint+bf16", 800, 2 | 4},
      {"random-k:0.1", 200, 4 | 16 << 3}, {"random-k-unbiased:3+qsgd:7", 50, 1 | 16 << 3},
      {"random-k:0.9+fp16+u32", 100, 2 | 4}, {"threshold:2048", 4096, 16 << 3},
      {"threshold:0.6+fp16+varint", 4000, 1 | 4 | 16 << 3}, {"threshold:0.2", 1000, 2 | 4},
      {"random-k:0.2+seeded", 300, 2 | 4},
  };
  std::uint64_t seed = 100;
  for (const auto& c : cases) {
    const auto values = noise(c.flags & 2 ? 4 * 61 : 2 * 97, seed);
    const auto in = compress_input::write(c.flags, c.d, static_cast<std::uint16_t>(seed), 1, 2, c.spec, values);
    save("compress", std::string(c.spec) + "-d" + std::to_string(c.d) + "-f" + std::to_string(c.flags), in);
    ++seed;
  }
  // raw float bits that are not finite: compress must throw non_finite_error
  std::vector<std::uint8_t> nan_bits = noise(4 * 8, 7);
  nan_bits[4 * 3 + 2] = 0xC0;
  nan_bits[4 * 3 + 3] = 0x7F;
  save("compress", "top-k-nan", compress_input::write(2 | 4, 16, 3, 0, 0, "top-k:2", nan_bits));
}

void schedule_seeds() {
  struct seed_case {
    const char* spec;
    std::size_t n;
  };
  const seed_case cases[] = {
      {"directed-ring", 5},     {"undirected-ring", 6},       {"torus:3x4", 12},      {"complete", 7},
      {"time-varying-ring", 8}, {"time-varying-ring:1,3,5", 9}, {"alternating-ring", 5}, {"exponential", 16},
      {"exponential:2", 10},    {"bidirectional-exponential", 8}, {"erdos-renyi:0.4", 10}, {"random:2", 12},
      {"random:1", 2},          {"complete", 1},
  };
  std::uint16_t seed = 9;
  for (const auto& c : cases)
    save("schedule", std::string(c.spec) + "-n" + std::to_string(c.n), schedule_input::write(c.n, seed++, c.spec));
}

std::vector<std::uint8_t> be32(std::uint32_t v) {
  return {static_cast<std::uint8_t>(v >> 24), static_cast<std::uint8_t>(v >> 16), static_cast<std::uint8_t>(v >> 8),
          static_cast<std::uint8_t>(v)};
}
std::vector<std::uint8_t> idx_images_header(std::uint32_t count, std::uint32_t rows, std::uint32_t cols) {
  std::vector<std::uint8_t> f;
  for (const std::uint32_t v : {0x803u, count, rows, cols}) {
    const auto b = be32(v);
    sparsepush_fuzz::put_bytes(f, b);
  }
  return f;
}
std::vector<std::uint8_t> idx_images_file(std::uint32_t count, std::uint32_t rows, std::uint32_t cols, std::uint64_t seed) {
  std::vector<std::uint8_t> f = idx_images_header(count, rows, cols);
  const auto pixels = noise(std::size_t{count} * rows * cols, seed);
  sparsepush_fuzz::put_bytes(f, pixels);
  return f;
}
std::vector<std::uint8_t> idx_labels_file(std::uint32_t count, std::uint8_t classes, std::uint64_t seed) {
  std::vector<std::uint8_t> f;
  for (const std::uint32_t v : {0x801u, count}) {
    const auto b = be32(v);
    sparsepush_fuzz::put_bytes(f, b);
  }
  for (const auto b : noise(count, seed)) f.push_back(static_cast<std::uint8_t>(b % classes));
  return f;
}
/// The gzip (RFC 1952) form of bytes, as zlib writes it.
std::vector<std::uint8_t> gzip(const std::vector<std::uint8_t>& bytes) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) throw std::runtime_error("deflateInit2");
  std::vector<std::uint8_t> out(deflateBound(&z, static_cast<uLong>(bytes.size())) + 32);
  z.next_in = const_cast<Bytef*>(bytes.data());
  z.avail_in = static_cast<uInt>(bytes.size());
  z.next_out = out.data();
  z.avail_out = static_cast<uInt>(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw std::runtime_error("deflate");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void idx_seeds() {
  const auto images = idx_images_file(3, 4, 5, 11);
  const auto labels = idx_labels_file(3, 10, 12);
  save("idx", "images", idx_input::write_one(images));
  save("idx", "labels", idx_input::write_one(labels));
  save("idx", "images.gz", idx_input::write_one(gzip(images)));
  save("idx", "labels.gz", idx_input::write_one(gzip(labels)));
  save("idx", "images-empty", idx_input::write_one(idx_images_file(0, 28, 28, 1)));
  save("idx", "images-truncated", idx_input::write_one(std::span(images).first(images.size() - 7)));
  save("idx", "images-huge-header", idx_input::write_one(idx_images_header(0x7FFFFFFF, 4096, 4096)));
  const auto labels_gz = gzip(labels);
  save("idx", "labels-truncated-gz", idx_input::write_one(std::span(labels_gz).first(labels_gz.size() / 2)));
  save("idx", "pair", idx_input::write_pair(images, labels));
  save("idx", "pair.gz", idx_input::write_pair(gzip(images), gzip(labels)));
  save("idx", "pair-count-mismatch", idx_input::write_pair(images, idx_labels_file(4, 10, 13)));
  auto bad_label = labels;
  bad_label.back() = 12;
  save("idx", "pair-label-12", idx_input::write_pair(images, bad_label));
}

void checkpoint_seeds() {
  const char* names[] = {"sparse-push-file", "sparse-push-payload", "choco-file", "choco-payload"};
  const auto seeds = sparsepush_fuzz::checkpoint_setup::seeds();
  for (std::size_t k = 0; k < seeds.size(); ++k) save("checkpoint", names[k], seeds[k]);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  root = argv[1];
  decode_seeds();
  compress_seeds();
  schedule_seeds();
  idx_seeds();
  checkpoint_seeds();
  std::printf("wrote %zu seed files under %s\n", written, root.string().c_str());
  return 0;
}
