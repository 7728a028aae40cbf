// wire_sizes: the bytes every built-in compressor puts on the wire for one vector of d floats
// (default d = 1e6, Gaussian values), measured by encoding a real message.
// Run: ./wire_sizes [d]
#include <cstdio>
#include <cstdlib>
#include <random>
#include <sparsepush/sparsepush.hpp>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  namespace sp = sparsepush;
  const std::size_t d = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 1000000;
  if (d == 0) {
    std::fprintf(stderr, "usage: wire_sizes [d > 0]\n");
    return 2;
  }
  std::vector<float> v(d);
  std::mt19937 gen(1);
  std::normal_distribution<float> normal;
  for (float& x : v) x = normal(gen);

  const char* specs[] = {"identity",          "identity+fp16",      "top-k:0.01+u32",
                         "top-k:0.01",        "top-k:0.01+fp16",    "top-k:0.01+int8",
                         "top-k:0.001",       "top-k:0.001+int8",   "random-k:0.01",      "random-k:0.01+seeded",
                         "random-k-unbiased:0.01+bf16", "threshold:0.01", "qsgd:16",
                         "qsgd:4",            "sign",               "top-k:0.01+sign"};
  std::printf("| compressor | values | index bytes | wire bytes | ratio vs fp32 |\n");
  std::printf("|---|---|---|---|---|\n");
  sp::compress_workspace<float> scratch;  // one for every call, as a node keeps its own
  for (const char* spec : specs) {
    sp::message q;
    sp::parse_compressor(spec).compress(std::span<const float>(v), q, {}, scratch);
    const std::size_t wire = sp::encode(q).size();
    std::printf("| `%s` | %u %s | %zu %s | %zu | %.1f |\n", spec, q.count, sp::to_string(q.value_enc),
                q.index_bytes(), sp::to_string(q.index_enc), wire,
                4.0 * static_cast<double>(d) / static_cast<double>(wire));
  }
  return 0;
}
