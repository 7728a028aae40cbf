// A consumer: compress an Eigen vector with top-K + error feedback, round-trip the wire bytes.
#include <Eigen/Core>
#include <cstdio>
#include <sparsepush/adapters/eigen.hpp>
#include <sparsepush/sparsepush.hpp>

int main() {
  Eigen::VectorXf x = Eigen::VectorXf::LinSpaced(1000, -1.0f, 1.0f);
  sparsepush::error_feedback<float> ef(1000);
  sparsepush::message q;
  ef.step(sparsepush::top_k{sparsepush::k_spec::count(10)}, x, q, {});
  const auto bytes = sparsepush::encode(q);
  const auto back = sparsepush::decode(bytes);
  // the ten largest magnitudes of LinSpaced(-1, 1) are the five at each end
  const bool ok = back.count == 10 && back.indices.front() == 0 && back.indices.back() == 999 &&
                  bytes.size() == q.wire_bytes();
  std::printf("consumer: %u values, %zu wire bytes: %s\n", back.count, bytes.size(), ok ? "ok" : "FAIL");
  return ok ? 0 : 1;
}
