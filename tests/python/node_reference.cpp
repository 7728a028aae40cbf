// tests/python/node_reference.cpp: the C++ side of the Python module's bit-identity test
// (tests/python/test_reference.py). Runs n push_sum_node's, one std::thread each, over an encoded
// loopback for a few rounds with local steps, and writes the settings, the inputs and the C++
// results to a file; the test feeds the same inputs to sparsepush.PushSumNode and compares bits.
// Usage: node_reference OUT f32|f64
// File: "SPREF001", u32 n, d, rounds, element size, f64 eta, gamma, u64 seed, two strings (u32
// length + bytes: schedule spec, compressor spec), then x0 [n][d], directions [rounds][n][d],
// x [n][d], u [n] (f64), e [n][d].
#include <sparsepush/sparsepush.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace sp = sparsepush;

template <class T>
int run(const char* path) {
  const std::uint32_t n = 5, d = 777, rounds = 6;
  const double eta = 0.5, gamma = 0.05;
  const std::uint64_t seed = 11;
  const std::string sched_spec = "exponential", comp_spec = "top-k:0.1";
  std::vector<std::vector<T>> x(n, std::vector<T>(d)), x0;
  for (std::uint32_t i = 0; i < n; ++i)
    for (std::uint32_t l = 0; l < d; ++l) x[i][l] = static_cast<T>(std::sin(0.013 * (l + 1) * (i + 3)) + 0.1 * i);
  x0 = x;
  std::vector<std::vector<std::vector<T>>> dir(rounds, std::vector<std::vector<T>>(n, std::vector<T>(d)));
  for (std::uint32_t t = 0; t < rounds; ++t)
    for (std::uint32_t i = 0; i < n; ++i)
      for (std::uint32_t l = 0; l < d; ++l) dir[t][i][l] = static_cast<T>(std::cos(0.007 * (l + 1) * (t + 1) + i));
  const auto sched = sp::parse_schedule(sched_spec, n, 0);
  const auto comp = sp::parse_compressor(comp_spec);
  sp::loopback_network net(n, sp::loopback_options{.mode = sp::loopback_mode::encoded});
  std::vector<sp::push_sum_node<std::vector<T>>> nodes;
  for (std::uint32_t i = 0; i < n; ++i) nodes.emplace_back(x[i], sp::node_options{i, seed, true});
  std::vector<std::thread> threads;
  for (std::uint32_t i = 0; i < n; ++i)
    threads.emplace_back([&, i] {
      auto ep = net.endpoint(i);
      for (std::uint32_t t = 0; t < rounds; ++t)
        nodes[i].round(t, sched, comp, ep, typename sp::push_sum_node<std::vector<T>>::step{eta, dir[t][i], gamma, true, false});
    });
  for (auto& th : threads) th.join();

  std::ofstream f(path, std::ios::binary);
  auto raw = [&](const void* p, std::size_t b) { f.write(static_cast<const char*>(p), static_cast<std::streamsize>(b)); };
  auto u32 = [&](std::uint32_t v) { raw(&v, 4); };
  auto str = [&](const std::string& s) { u32(static_cast<std::uint32_t>(s.size())); raw(s.data(), s.size()); };
  raw("SPREF001", 8);
  u32(n), u32(d), u32(rounds), u32(sizeof(T));
  raw(&eta, 8), raw(&gamma, 8), raw(&seed, 8);
  str(sched_spec), str(comp_spec);
  for (const auto& v : x0) raw(v.data(), d * sizeof(T));
  for (const auto& r : dir)
    for (const auto& v : r) raw(v.data(), d * sizeof(T));
  for (const auto& nd : nodes) raw(nd.x().data(), d * sizeof(T));
  for (const auto& nd : nodes) {
    const double u = nd.u();
    raw(&u, 8);
  }
  for (const auto& nd : nodes) raw(nd.residual().data(), d * sizeof(T));
  return f.good() ? 0 : 1;
}

int main(int argc, char** argv) {
  if (argc != 3 || (std::strcmp(argv[2], "f32") != 0 && std::strcmp(argv[2], "f64") != 0)) {
    std::fprintf(stderr, "usage: %s OUT f32|f64\n", argv[0]);
    return 2;
  }
  return std::strcmp(argv[2], "f32") == 0 ? run<float>(argv[1]) : run<double>(argv[1]);
}
