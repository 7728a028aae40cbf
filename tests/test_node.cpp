// Tests of one node as the unit (gossip/node.hpp, transport/loopback.hpp): nodes on their own
// threads over the default (copied) and the encoded loopback give the group's bits; the three
// loopback modes give the same bits for SP top-K+int8, SGP, SCSP and CHOCO and under a group;
// every error path of a round leaves every node and the ledger as they were; the loopback's own
// errors name round, sender and receiver; the algorithms run on a user tensor type and compressor.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <memory>
#include <thread>
#include <sparsepush/sparsepush.hpp>

#include "test_util.hpp"

using namespace sparsepush;

namespace {
using vec = std::vector<double>;

std::vector<vec> random_models(std::size_t n, std::size_t d, unsigned seed) {
  std::vector<vec> x;
  for (std::size_t i = 0; i < n; ++i) x.push_back(test::gaussian<double>(d, seed + static_cast<unsigned>(i)));
  return x;
}

/// A deterministic oracle: node i pulls towards its own target, p = x - b_i (plus a round term).
gradient_oracle<double> pull_oracle(std::size_t d) {
  return [d](std::uint32_t i, std::uint32_t t, std::span<const double> x, std::span<double> p) {
    for (std::size_t l = 0; l < d; ++l) p[l] = x[l] - std::sin(0.1 * double(l * (i + 1)) + 0.01 * t);
  };
}

bool same_bits(std::span<const double> a, std::span<const double> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

template <class A>
void require_same_models(const A& a, const A& b) {
  for (std::size_t i = 0; i < a.num_nodes(); ++i) REQUIRE(same_bits(a.model(i), b.model(i)));
}
}  // namespace

TEST_CASE("the loopback's modes give the same bits for SP top-K+int8, SGP, SCSP and CHOCO", "[gossip][transport]") {
  const std::size_t n = 8, d = 300;
  const auto x0 = random_models(n, d, 3);
  const auto oracle = pull_oracle(d);
  const sparse_push_options enc{.threads = 2, .seed = 5, .network = {.mode = loopback_mode::encoded}};
  const sparse_push_options ref{.threads = 2, .seed = 5};
  const sparse_push_options byref{.threads = 2, .seed = 5, .network = {.mode = loopback_mode::by_reference}};
  auto run = [&](auto& alg, std::uint32_t rounds) {
    for (std::uint32_t t = 0; t < rounds; ++t) alg.round(t, oracle, 0.05);
  };
  SECTION("SP top-K+int8 on the time-varying ring") {
    const auto ph = sparse_push_phases(parse_compressor("top-k:0.05+int8"), 0.1);
    sparse_push<double> a(x0, parse_schedule("time-varying-ring", n), ph, ref);
    sparse_push<double> b(x0, parse_schedule("time-varying-ring", n), ph, enc);
    sparse_push<double> c(x0, parse_schedule("time-varying-ring", n), ph, byref);
    run(a, 30);
    run(b, 30);
    run(c, 30);
    require_same_models(a, b);
    require_same_models(a, c);
    REQUIRE(a.bytes_sent() == b.bytes_sent());
    REQUIRE(a.bytes_sent() == c.bytes_sent());
  }
  SECTION("SGP on the exponential graph") {
    sparse_push<double> a(x0, parse_schedule("exponential", n), sgp_phases(), ref);
    sparse_push<double> b(x0, parse_schedule("exponential", n), sgp_phases(), enc);
    run(a, 30);
    run(b, 30);
    require_same_models(a, b);
  }
  SECTION("SCSP with random-K and random out-peers") {
    const auto ph = scsp_phases(parse_compressor("random-k:0.1+fp16"), 0.05, 20, 6);
    sparse_push<double> a(x0, parse_schedule("random:2", n, 4), ph, ref);
    sparse_push<double> b(x0, parse_schedule("random:2", n, 4), ph, enc);
    run(a, 26);
    run(b, 26);
    require_same_models(a, b);
  }
  SECTION("CHOCO with top-K, both forms") {
    for (auto form : {choco_form::weighted_sum, choco_form::per_neighbour}) {
      choco<double> a(x0, parse_schedule("undirected-ring", n),
                      {.consensus_step = 0.4, .compressor = parse_compressor("top-k:0.1"), .form = form, .threads = 2});
      choco<double> b(x0, parse_schedule("undirected-ring", n),
                      {.consensus_step = 0.4, .compressor = parse_compressor("top-k:0.1"), .form = form, .threads = 2,
                       .network = {.mode = loopback_mode::encoded}});
      run(a, 30);
      run(b, 30);
      require_same_models(a, b);
      REQUIRE(a.bytes_sent() == b.bytes_sent());
    }
  }
}

TEST_CASE("nodes on their own threads over the default and the encoded loopback give the group's bits",
          "[gossip][transport]") {
  const std::size_t n = 6, d = 500;
  const auto x0 = random_models(n, d, 11);
  const auto sched = parse_schedule("time-varying-ring", n);
  const auto comp = parse_compressor("top-k:0.05");
  const std::uint32_t rounds = 25;
  auto direction = [d](std::uint32_t i, std::uint32_t t) {
    vec p(d);
    for (std::size_t l = 0; l < d; ++l) p[l] = std::cos(0.3 * double(l) + i + 0.1 * t);
    return p;
  };
  // the group, in lockstep
  push_sum_group<vec> group(x0, {.eta = 0.3, .threads = 1, .seed = 2});
  loopback_network gnet(n);
  std::vector<vec> dirs(n);
  for (std::uint32_t t = 0; t < rounds; ++t) {
    for (std::uint32_t i = 0; i < n; ++i) dirs[i] = direction(i, t);
    group.round(sched, comp, gnet, t, {0.3, dirs, 0.1});
  }
  // one node per thread, free running: safe in the default mode (copied) and in encoded mode
  for (const auto mode : {loopback_options{}.mode, loopback_mode::encoded}) {
    INFO("mode " << static_cast<int>(mode));
    loopback_network net(n, {.mode = mode});
    std::vector<vec> result(n);
    std::vector<double> us(n);
    {
      std::vector<std::jthread> threads;
      for (std::uint32_t i = 0; i < n; ++i)
        threads.emplace_back([&, i] {
          push_sum_node<vec> node(x0[i], {.id = i, .seed = 2});
          auto ep = net.endpoint(i);
          for (std::uint32_t t = 0; t < rounds; ++t) {
            const vec p = direction(i, t);
            node.round(t, sched, comp, ep, {.eta = 0.3, .direction = p, .gamma = 0.1});
          }
          result[i] = node.tensor();
          us[i] = node.u();
        });
    }
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(same_bits(result[i], group.x(i)));
      REQUIRE(us[i] == group.u(i));
    }
    REQUIRE(net.total_bytes() == gnet.total_bytes());
    REQUIRE(net.total_messages() == gnet.total_messages());
  }
}

TEST_CASE("collect hands envelopes over in ascending sender order whatever the arrival order", "[transport]") {
  const std::size_t n = 5, d = 40;
  for (const auto mode :
       {loopback_mode::copied, loopback_mode::encoded, loopback_mode::by_reference}) {
    INFO("mode " << static_cast<int>(mode));
    loopback_network net(n, {.mode = mode});
    std::vector<message> msgs(n);
    for (std::uint32_t j = 0; j < n; ++j) {
      const auto v = test::gaussian<double>(d, 30 + j);
      compress(identity{}, std::span<const double>(v), msgs[j], {0, j, 0});
    }
    // every node pushes to node 0; post in descending order
    for (std::uint32_t j = n; j-- > 1;) {
      const std::vector<out_edge> col{{j, 0.5}, {0, 0.5}};
      net.endpoint(j).post(3, col, 1.0 + j, msgs[j]);
    }
    std::vector<in_edge> row{{0, 1.0}};
    for (std::uint32_t j = 1; j < n; ++j) row.push_back({j, 0.5});
    inbox box;
    net.endpoint(0).collect(3, row, box);
    REQUIRE(box.envelopes.size() == n - 1);
    for (std::uint32_t k = 0; k < n - 1; ++k) {
      REQUIRE(box.envelopes[k].from == k + 1);
      REQUIRE(box.envelopes[k].u == 1.0 + (k + 1));
      REQUIRE(encode(*box.envelopes[k].msg) == encode(msgs[k + 1]));
      // only by_reference hands over the sender's own message; the others hand over the receiver's
      REQUIRE((box.envelopes[k].msg == &msgs[k + 1]) == (mode == loopback_mode::by_reference));
    }
    REQUIRE(net.total_bytes() == (n - 1) * (envelope_header_bytes + msgs[1].wire_bytes()));
  }
}

TEST_CASE("the default loopback copies: a sender may rewrite its message before the receiver collects",
          "[transport]") {
  REQUIRE(loopback_options{}.mode == loopback_mode::copied);
  REQUIRE(for_lockstep({}).mode == loopback_mode::by_reference);
  REQUIRE(for_lockstep({.mode = loopback_mode::encoded}).mode == loopback_mode::encoded);
  REQUIRE(for_lockstep({.drop_probability = 0.2, .seed = 4}).drop_probability == 0.2);
  const vec v0 = test::gaussian<double>(30, 3), v1 = test::gaussian<double>(30, 4);
  message m, first;
  compress(top_k{k_spec::count(4)}, std::span<const double>(v0), m, {0, 1, 0});
  first = m;
  loopback_network net(2);
  const std::vector<out_edge> col{{0, 0.5}, {1, 0.5}};
  const std::vector<in_edge> row{{0, 0.5}, {1, 0.5}};
  inbox box;
  for (std::uint32_t t = 0; t < 3; ++t) {  // rounds 0 and 1 posted before round 0 is collected
    net.endpoint(1).post(t, col, 1.0, m);
    compress(top_k{k_spec::count(4)}, std::span<const double>(v1), m, {0, 1, t + 1});  // the next round's
    if (t == 0) continue;
    net.endpoint(0).collect(t - 1, row, box);
    REQUIRE(box.envelopes.size() == 1);
    if (t == 1) REQUIRE(encode(*box.envelopes[0].msg) == encode(first));
  }
}

TEST_CASE("the loopback's three modes give the same bits under a lockstep group, with loss", "[gossip][transport]") {
  const std::size_t n = 6, d = 120;
  const auto x0 = random_models(n, d, 17);
  const auto sched = parse_schedule("exponential", n);
  const auto comp = parse_compressor("top-k:0.1+int8");
  std::vector<std::unique_ptr<push_sum_group<vec>>> groups;
  std::vector<std::unique_ptr<loopback_network>> nets;
  for (const auto mode : {loopback_mode::copied, loopback_mode::encoded, loopback_mode::by_reference}) {
    groups.push_back(std::make_unique<push_sum_group<vec>>(
        x0, gossip_options{.eta = 0.5, .threads = 2, .seed = 3, .recovery = loss_recovery::acknowledged}));
    nets.push_back(std::make_unique<loopback_network>(n, loopback_options{.drop_probability = 0.2, .seed = 8, .mode = mode}));
  }
  for (std::uint32_t t = 0; t < 25; ++t)
    for (std::size_t k = 0; k < groups.size(); ++k) groups[k]->round(sched, comp, *nets[k], t);
  for (std::size_t k = 1; k < groups.size(); ++k) {
    for (std::size_t i = 0; i < n; ++i) {
      REQUIRE(same_bits(groups[0]->x(i), groups[k]->x(i)));
      REQUIRE(groups[0]->u(i) == groups[k]->u(i));
      REQUIRE(nets[0]->messages_dropped(i) == nets[k]->messages_dropped(i));
      REQUIRE(nets[0]->bytes_sent(i) == nets[k]->bytes_sent(i));
    }
    REQUIRE(nets[0]->messages_dropped() == nets[k]->messages_dropped());
  }
  REQUIRE(nets[0]->messages_dropped() > 0);
}

TEST_CASE("the loopback names round, sender and receiver when an envelope is missing or unexpected", "[transport]") {
  message m;
  const vec v(10, 1.0);
  compress(identity{}, std::span<const double>(v), m, {});
  const std::vector<in_edge> row{{0, 0.5}, {2, 0.5}};
  SECTION("missing: a timeout, not a hang") {
    loopback_network net(3, {.timeout = std::chrono::milliseconds(50)});
    inbox box;
    REQUIRE_THROWS_AS(net.endpoint(0).collect(7, row, box), transport_error);
    try {
      net.endpoint(0).collect(7, row, box);
    } catch (const transport_error& e) {
      const std::string what = e.what();
      REQUIRE_THAT(what, Catch::Contains("round 7") && Catch::Contains("node 0") && Catch::Contains("node(s) 2"));
    }
  }
  SECTION("unexpected sender") {
    loopback_network net(3);
    const std::vector<out_edge> c1{{1, 0.5}, {0, 0.5}}, c2{{2, 0.5}, {0, 0.5}};
    net.endpoint(1).post(4, c1, 1.0, m);
    net.endpoint(2).post(4, c2, 1.0, m);
    inbox box;
    REQUIRE_THROWS_WITH(net.endpoint(0).collect(4, std::vector<in_edge>{{0, 0.5}, {1, 0.5}}, box),
                        Catch::Contains("round 4") && Catch::Contains("from node 2") &&
                            Catch::Contains("does not list"));
  }
  SECTION("rounds never mix") {
    loopback_network net(3, {.timeout = std::chrono::milliseconds(50)});
    const std::vector<out_edge> c2{{2, 0.5}, {0, 0.5}};
    net.endpoint(2).post(5, c2, 1.0, m);  // round 5 is there, round 4 is not
    inbox box;
    REQUIRE_THROWS_WITH(net.endpoint(0).collect(4, std::vector<in_edge>{{0, 0.5}, {2, 0.5}}, box),
                        Catch::Contains("round 4"));
    net.endpoint(0).collect(5, std::vector<in_edge>{{0, 0.5}, {2, 0.5}}, box);
    REQUIRE(box.envelopes.size() == 1);
  }
  SECTION("bad settings and nodes") {
    REQUIRE_THROWS_AS(loopback_network(3, {.timeout = std::chrono::milliseconds(0)}), config_error);
    loopback_network net(3);
    REQUIRE_THROWS_WITH(net.endpoint(3), Catch::Contains("node 3"));
  }
}

TEST_CASE("an envelope frame round-trips and rejects bad headers", "[transport]") {
  message m;
  const vec v = test::gaussian<double>(64, 9);
  compress(top_k{k_spec::count(5)}, std::span<const double>(v), m, {});
  std::vector<std::byte> frame;
  encode_envelope({3, 17, 0.25, 1.5}, m, frame);
  REQUIRE(frame.size() == envelope_header_bytes + m.wire_bytes());
  message back;
  const auto h = decode_envelope(frame, back);
  REQUIRE((h.from == 3 && h.round == 17 && h.share == 0.25 && h.u == 1.5));
  REQUIRE(encode(back) == encode(m));
  // header fields at their documented offsets, little-endian
  REQUIRE(std::to_integer<int>(frame[0]) == 3);
  REQUIRE(std::to_integer<int>(frame[4]) == 17);
  double share = 0;
  std::memcpy(&share, frame.data() + 8, 8);
  REQUIRE(share == 0.25);
  auto bad = frame;
  const double nan = std::nan("");
  std::memcpy(bad.data() + 16, &nan, 8);
  REQUIRE_THROWS_AS(decode_envelope(bad, back), decode_error);
  REQUIRE_THROWS_AS(decode_envelope(std::span<const std::byte>(frame).first(10), back), decode_error);
  REQUIRE(encode(back) == encode(m));  // untouched by the failed decodes
  // a receiver knows its dimension: a 32-byte message announcing 2^32 - 1 coordinates is refused
  message huge;
  huge.dim = 0xFFFFFFFFu;
  huge.count = 0;
  huge.index_enc = index_encoding::raw_u32;
  huge.value_enc = value_encoding::f32;
  const auto bytes = encode(huge);
  REQUIRE(bytes.size() == message_header_bytes);
  REQUIRE(decode(bytes).dim == 0xFFFFFFFFu);  // valid as such
  REQUIRE_THROWS_WITH(decode(bytes, back, 64), Catch::Contains("announces dim 4294967295") && Catch::Contains("64"));
  std::vector<std::byte> hf;
  encode_envelope({3, 17, 0.25, 1.5}, huge, hf);
  REQUIRE_THROWS_AS(decode_envelope(hf, back, 64), decode_error);
  // and the encoded loopback refuses it for a node of dimension 64
  loopback_network net(2, {.mode = loopback_mode::encoded});
  net.endpoint(1).post(0, std::vector<out_edge>{{1, 0.5}, {0, 0.5}}, 1.0, huge);
  inbox box;
  box.dim = 64;
  REQUIRE_THROWS_WITH(net.endpoint(0).collect(0, std::vector<in_edge>{{0, 0.5}, {1, 0.5}}, box),
                      Catch::Contains("announces dim 4294967295"));
}

namespace {
/// Everything a round could change, for all nodes and the ledger.
struct snapshot {
  std::vector<vec> x, e;
  std::vector<double> u;
  std::vector<std::vector<std::byte>> msg;
  std::size_t bytes = 0, messages = 0, trace = 0;
  friend bool operator==(const snapshot&, const snapshot&) = default;
};
snapshot take(const push_sum_group<vec>& g, const loopback_network& net) {
  snapshot s;
  for (std::size_t i = 0; i < g.num_nodes(); ++i) {
    s.x.emplace_back(g.x(i).begin(), g.x(i).end());
    s.e.emplace_back(g.residual(i).begin(), g.residual(i).end());
    s.u.push_back(g.u(i));
    s.msg.push_back(g.last_message(i).dim ? encode(g.last_message(i)) : std::vector<std::byte>{});
  }
  s.bytes = net.total_bytes();
  s.messages = net.total_messages();
  s.trace = net.trace().size();
  return s;
}

/// A schedule of 4 nodes whose round 1 has a defect chosen by `bad`.
struct faulty_schedule {
  int bad = 0;
  std::size_t num_nodes() const { return 4; }
  std::size_t period() const { return 2; }
  void out_edges(std::uint64_t round, std::uint32_t node, std::vector<out_edge>& out) const {
    out.assign({{node, 0.5}, {(node + 1) % 4, 0.5}});
    if (round % 2 == 1 && node == 2) {
      if (bad == 1) out = {{3, 1.0}};                 // no self-loop
      if (bad == 2) out = {{2, 0.5}, {9, 0.5}};       // receiver out of range
    }
  }
};
}  // namespace

TEST_CASE("every error path of a round leaves every node, message and the ledger as they were", "[gossip]") {
  const std::size_t n = 4, d = 50;
  push_sum_group<vec> g(random_models(n, d, 21), {.eta = 0.5, .threads = 2, .seed = 1});
  loopback_network net(n, {.trace = true});
  const auto sched = parse_schedule("exponential", n);
  const auto comp = parse_compressor("top-k:0.2");
  std::vector<vec> dirs(n, vec(d, 0.1));
  g.round(sched, comp, net, 0, {0.5, dirs, 0.1});  // a good round first: e and messages are set
  const snapshot before = take(g, net);
  using step = push_sum_group<vec>::step;
  auto dirs_nan = dirs;
  dirs_nan[2][7] = std::nan("");
  auto dirs_short = dirs;
  dirs_short[1].resize(d - 1);
  auto dirs_inf = dirs;
  dirs_inf[3][0] = 1e308;  // x - gamma p overflows at gamma = -1e10
  const std::vector<vec> too_few(n - 1, vec(d, 0.0));
  top_k per_layer{k_spec::fraction(0.1)};
  per_layer.segments = {0, 30, 20};
  struct bad_case {
    const char* name;
    std::function<void()> run;
    const char* says;
  };
  const std::vector<bad_case> cases{
      {"eta 0", [&] { g.round(sched, comp, net, 1, step{0.0, dirs, 0.1}); }, "eta"},
      {"eta > 1", [&] { g.round(sched, comp, net, 1, step{1.5, {}, 0.0}); }, "eta"},
      {"NaN direction", [&] { g.round(sched, comp, net, 1, step{0.5, dirs_nan, 0.1}); }, "index 7"},
      {"short direction", [&] { g.round(sched, comp, net, 1, step{0.5, dirs_short, 0.1}); }, "node 1"},
      {"too few directions", [&] { g.round(sched, comp, net, 1, step{0.5, too_few, 0.1}); }, "3 local directions"},
      {"NaN learning rate", [&] { g.round(sched, comp, net, 1, step{0.5, dirs, std::nan("")}); }, "learning rate"},
      {"overflowing step", [&] { g.round(sched, comp, net, 1, step{0.5, dirs_inf, -1e10}); }, "node 3"},
      {"k > d", [&] { g.round(sched, top_k{k_spec::count(d + 1)}, net, 1, step{0.5, dirs, 0.1}); }, "exceeds"},
      {"bad segments", [&] { g.round(sched, per_layer, net, 1, step{0.5, dirs, 0.1}); }, "segment"},
      {"schedule size", [&] { g.round(parse_schedule("exponential", 5), comp, net, 1, step{0.5, dirs, 0.1}); }, "5 nodes"},
      {"network size", [&] {
         loopback_network other(5);
         g.round(sched, comp, other, 1, step{0.5, dirs, 0.1});
       }, "network has 5"},
      {"missing self-loop", [&] { g.round(faulty_schedule{1}, comp, net, 1, step{0.5, dirs, 0.1}); }, "self-loop"},
      {"receiver out of range", [&] { g.round(faulty_schedule{2}, comp, net, 1, step{0.5, dirs, 0.1}); }, "node 9"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    REQUIRE_THROWS_WITH(c.run(), Catch::Contains(c.says));
    REQUIRE(take(g, net) == before);
  }
  g.round(sched, comp, net, 1, {0.5, dirs, 0.1});  // and the group still runs
  REQUIRE(!(take(g, net) == before));
}

namespace {
/// 4 nodes on a directed ring: every node keeps 1/2 and pushes 1/2 to the next, except node 2 from
/// round `from` on, which keeps `self` and pushes `other` (aperiodic, or period 2 with from = 1).
struct ring_with_bad_column {
  double self = 0.5, other = 0.5;
  std::uint64_t from = 1;
  std::size_t period_ = 0;
  std::size_t num_nodes() const { return 4; }
  std::size_t period() const { return period_; }
  void out_edges(std::uint64_t round, std::uint32_t node, std::vector<out_edge>& out) const {
    const bool bad = node == 2 && (period_ ? round % period_ >= from : round >= from);
    out.assign({{node, bad ? self : 0.5}, {(node + 1) % 4, bad ? other : 0.5}});
  }
};
/// The same as a periodic_schedule (rounds built once: round 0 valid, round 1 with the bad column).
periodic_schedule periodic_ring_with_bad_column(double self, double other) {
  std::vector<mixing_round> rounds;
  for (std::uint64_t t = 0; t < 2; ++t) {
    std::vector<std::vector<out_edge>> cols(4);
    for (std::uint32_t j = 0; j < 4; ++j) ring_with_bad_column{self, other, 1, 2}.out_edges(t, j, cols[j]);
    rounds.push_back(mixing_round::from_columns(cols));
  }
  return periodic_schedule(std::move(rounds));
}
/// The bad columns: shares summing to 2 or to 0.5 (sum u would double or halve every round) and
/// shares out of [0, 1] that sum to 1 (x would swing without bound); the message each must give.
struct bad_column {
  double self, other;
  const char* says;
};
const bad_column bad_columns[] = {
    {1.0, 1.0, "round 1, node 2: shares sum to 2, not 1 (W must be column stochastic)"},
    {0.25, 0.25, "round 1, node 2: shares sum to 0.5, not 1 (W must be column stochastic)"},
    {1.5, -0.5, "round 1, node 2: share 1.5 to node 2 is not in [0, 1]"},
    {-0.5, 1.5, "round 1, node 2: share -0.5 to node 2 is not in [0, 1]"},
    {0.5, std::nan(""), "round 1, node 2: share nan to node 3 is not in [0, 1]"},
};
}  // namespace

TEST_CASE("a column that is not stochastic stops the round that uses it at every path, before any node moves",
          "[gossip][topology]") {
  const std::size_t n = 4, d = 40;
  const auto comp = parse_compressor("top-k:0.25");
  for (const auto& bad : bad_columns) {
    INFO(bad.says);
    for (const std::size_t threads : {1, 2}) {
      // the group: round 0 is valid and runs; round 1 (periodic: the schedule's second round)
      // throws, and every node, message and the ledger are as round 0 left them
      for (const bool periodic : {true, false}) {
        push_sum_group<vec> g(random_models(n, d, 40), {.eta = 0.5, .threads = threads, .seed = 3});
        loopback_network net(n, {.trace = true});
        const std::vector<vec> dirs(n, vec(d, 0.1));
        auto round = [&](std::uint32_t t) {
          if (periodic) g.round(periodic_ring_with_bad_column(bad.self, bad.other), comp, net, t, {0.5, dirs, 0.1});
          else g.round(ring_with_bad_column{bad.self, bad.other}, comp, net, t, {0.5, dirs, 0.1});
        };
        round(0);
        const snapshot after0 = take(g, net);
        try {
          round(1);
          FAIL("round 1 ran on a column that is not stochastic");
        } catch (const schedule_error& e) {
          REQUIRE(std::string(e.what()) == std::string("sparsepush: ") + bad.says);
        }
        REQUIRE(take(g, net) == after0);
        // the periodic schedule's round 2 is its valid round 0 again
        if (periodic) REQUIRE_NOTHROW(round(2));
      }
    }
    // a node alone: its own round checks its column before the local step
    {
      push_sum_node<vec> node(test::gaussian<double>(d, 7), {.id = 2});
      loopback_network net(n);
      auto ep = net.endpoint(2);
      const vec before(node.x().begin(), node.x().end());
      const vec p(d, 0.3);
      REQUIRE_THROWS_MATCHES(node.round(1, ring_with_bad_column{bad.self, bad.other}, comp, ep, {0.5, p, 0.1}),
                             schedule_error, Catch::Message(std::string("sparsepush: ") + bad.says));
      REQUIRE(vec(node.x().begin(), node.x().end()) == before);
      REQUIRE(node.u() == 1.0);
      REQUIRE(net.total_bytes() == 0);
    }
    // the loopback's post, in every mode, refuses the column before it files or counts an envelope
    for (const auto mode : {loopback_mode::copied, loopback_mode::encoded, loopback_mode::by_reference}) {
      loopback_network net(n, {.trace = true, .mode = mode});
      message m;
      const vec v = test::gaussian<double>(d, 9);
      compress(identity{}, std::span<const double>(v), m, {0, 2, 1});
      const std::vector<out_edge> col{{2, bad.self}, {3, bad.other}};
      REQUIRE_THROWS_MATCHES(net.endpoint(2).post(1, col, 1.0, m), schedule_error,
                             Catch::Message(std::string("sparsepush: ") + bad.says));
      REQUIRE(net.total_bytes() == 0);
      REQUIRE(net.trace().empty());
    }
    // sparse_push validates the period before round 0: the same error
    REQUIRE_THROWS_MATCHES(sparse_push<double>(random_models(n, d, 40), periodic_ring_with_bad_column(bad.self, bad.other),
                                               sparse_push_phases(top_k{k_spec::fraction(0.25)}, 0.5)),
                           schedule_error, Catch::Message(std::string("sparsepush: ") + bad.says));
  }
}

TEST_CASE("sparse_push refuses a bad column of an aperiodic schedule beyond its validation window, in that round",
          "[algorithm][topology]") {
  // validate_schedule() sees 64 rounds of an aperiodic schedule; round 70 is checked when it runs
  const std::size_t n = 4, d = 20;
  sparse_push<double, any_compressor, ring_with_bad_column> sp(random_models(n, d, 50), ring_with_bad_column{1.0, 1.0, 70},
                         sparse_push_phases(top_k{k_spec::fraction(0.25)}, 0.5));
  const auto oracle = pull_oracle(d);
  for (std::uint32_t t = 0; t < 70; ++t) sp.round(t, oracle, 0.05);
  std::vector<vec> x;
  std::vector<double> u;
  for (std::size_t i = 0; i < n; ++i) {
    x.emplace_back(sp.group().x(i).begin(), sp.group().x(i).end());
    u.push_back(sp.group().u(i));
  }
  const auto bytes = sp.bytes_sent();
  REQUIRE_THROWS_MATCHES(sp.round(70, oracle, 0.05), schedule_error,
                         Catch::Message("sparsepush: round 70, node 2: shares sum to 2, not 1 (W must be column "
                                        "stochastic)"));
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(vec(sp.group().x(i).begin(), sp.group().x(i).end()) == x[i]);
    REQUIRE(sp.group().u(i) == u[i]);
  }
  REQUIRE(sp.bytes_sent() == bytes);
  // the 70 valid rounds conserved the weight: sum u = n (the bad column would have doubled it)
  REQUIRE(sp.weight_mass() == Approx(double(n)).epsilon(1e-12));
}

TEST_CASE("sparse_push and choco refuse a bad compressor before any node moves", "[algorithm]") {
  const std::size_t n = 4, d = 30;
  const auto x0 = random_models(n, d, 8);
  const auto oracle = pull_oracle(d);
  sparse_push<double> sp(x0, parse_schedule("exponential", n), sparse_push_phases(top_k{k_spec::count(d + 5)}, 0.5));
  REQUIRE_THROWS_WITH(sp.round(0, oracle, 0.1), Catch::Contains("exceeds the tensor size d = 30"));
  choco<double> ch(x0, parse_schedule("undirected-ring", n), {.compressor = top_k{k_spec::count(d + 5)}});
  REQUIRE_THROWS_WITH(ch.round(0, oracle, 0.1), Catch::Contains("exceeds"));
  for (std::size_t i = 0; i < n; ++i) {
    REQUIRE(sp.model(i) == x0[i]);
    REQUIRE(ch.model(i) == x0[i]);
  }
  REQUIRE(sp.bytes_sent() == 0);
  REQUIRE(ch.bytes_sent() == 0);
}

TEST_CASE("state_bytes counts the scratch a node keeps", "[gossip]") {
  const std::size_t d = 20000;
  push_sum_node<std::vector<float>> node(std::vector<float>(d, 1.0f), {.id = 0});
  const std::size_t fresh = node.state_bytes();
  REQUIRE(fresh >= 2 * d * sizeof(float) + sizeof(double));  // x and e at least
  const auto sched = parse_schedule("directed-ring", 2);
  loopback_network net(2, {.timeout = std::chrono::milliseconds(100)});
  auto ep = net.endpoint(0);
  // a lone node on a 2-node ring: its post goes out, its collect would wait for node 1, so run the steps
  std::vector<out_edge> col;
  sched.out_edges(0, 0, col);
  const std::vector<float> p(d, 0.5f);
  node.check(0, top_k{k_spec::fraction(0.01)}, col, {.eta = 0.5, .direction = p, .gamma = 0.1});
  node.local_step(p, 0.1);
  node.compress(top_k{k_spec::fraction(0.01)}, 0);
  node.post(ep, 0, col);
  node.mix(0.5, node.self_share(col));
  // the top-K histogram, candidates and message buffers are now part of the node's state
  REQUIRE(node.state_bytes() >= fresh + node.outgoing().indices.size() * 4 + node.outgoing().payload.size());
  REQUIRE(node.state_bytes() > fresh + 1024 * sizeof(std::uint32_t));
}

// ---- a user tensor type and a user compressor, through every algorithm ---------------------

namespace {
/// A tensor with no range interface.
struct user_tensor {
  std::shared_ptr<double[]> p;
  std::size_t n = 0;
  user_tensor() = default;
  explicit user_tensor(const vec& v) : p(new double[v.size()]), n(v.size()) { std::copy(v.begin(), v.end(), p.get()); }
  user_tensor(const user_tensor& o) : p(new double[o.n]), n(o.n) { std::copy(o.p.get(), o.p.get() + o.n, p.get()); }
  user_tensor& operator=(const user_tensor& o) {
    user_tensor t(o);
    p = t.p;
    n = t.n;
    return *this;
  }
};
}  // namespace

template <>
struct sparsepush::tensor_traits<user_tensor> {
  using value_type = double;
  static double* data(user_tensor& t) { return t.p.get(); }
  static const double* data(const user_tensor& t) { return t.p.get(); }
  static std::size_t size(const user_tensor& t) { return t.n; }
};

namespace {
/// A user compressor with only the 3-argument compress (no workspace, no fused feedback): the
/// generic error-feedback path v = x + e; q = C(v); e = v - q must give the fused top-K's bits.
struct my_top_half {
  template <class T>
  void compress(std::span<const T> v, message& m, const context& ctx) const {
    sparsepush::compress(top_k{k_spec::count(v.size() / 2)}, v, m, ctx);
  }
};
}  // namespace

TEST_CASE("SCSP, CHOCO and centralized run on a user tensor type with a user compressor", "[algorithm]") {
  const std::size_t n = 8, d = 40;
  const auto xs = random_models(n, d, 13);
  std::vector<user_tensor> ut;
  for (const auto& x : xs) ut.emplace_back(x);
  const auto oracle = pull_oracle(d);
  // the user compressor through the generic path equals top-K(d/2) through any_compressor
  const auto ph_user = scsp_phases<my_top_half>(my_top_half{}, 0.1, 30, 8);
  const auto ph_ref = scsp_phases(top_k{k_spec::count(d / 2)}, 0.1, 30, 8);
  sparse_push<user_tensor, my_top_half> a(ut, parse_schedule("time-varying-ring", n), ph_user, {.threads = 2});
  sparse_push<double> b(xs, parse_schedule("time-varying-ring", n), ph_ref, {.threads = 2});
  for (std::uint32_t t = 0; t < 38; ++t) {
    a.round(t, oracle, 0.05);
    b.round(t, oracle, 0.05);
  }
  for (std::size_t i = 0; i < n; ++i) {
    const user_tensor m = a.model(i);
    REQUIRE(same_bits(as_const_span(m), b.model(i)));
  }
  REQUIRE(a.group().consensus_distance() < 1e-9);  // SCSP's final rounds averaged exactly
  const auto rep = report<double>(a, 37);
  REQUIRE(rep.parameter_divergence < 1e-9);
  REQUIRE(rep.bytes_sent == b.bytes_sent());

  choco<user_tensor, my_top_half> c(ut, parse_schedule("undirected-ring", n), {.consensus_step = 0.3});
  choco<double> c_ref(xs, parse_schedule("undirected-ring", n),
                      {.consensus_step = 0.3, .compressor = top_k{k_spec::count(d / 2)}});
  centralized<user_tensor> z(ut[0], n);
  centralized<double> z_ref(xs[0], n);
  for (std::uint32_t t = 0; t < 20; ++t) {
    c.round(t, oracle, 0.05);
    c_ref.round(t, oracle, 0.05);
    z.round(t, oracle, 0.05);
    z_ref.round(t, oracle, 0.05);
  }
  for (std::size_t i = 0; i < n; ++i) REQUIRE(same_bits(as_const_span(c.model(i)), c_ref.model(i)));
  REQUIRE(same_bits(as_const_span(z.model(0)), z_ref.model(0)));
}

// ---- degenerate networks ---------------------------------------------------------------------

TEST_CASE("one node is plain SGD, bit for bit, for SP, SGP, SCSP and CHOCO", "[algorithm]") {
  const std::size_t d = 50;
  const periodic_schedule alone({mixing_round::from_columns({{{0, 1.0}}})}, "alone");
  const vec x0 = test::gaussian<double>(d, 77);
  const auto oracle = pull_oracle(d);
  // the reference: x <- x - lr p(x), nothing else
  vec ref = x0;
  vec p(d);
  for (std::uint32_t t = 0; t < 30; ++t) {
    oracle(0, t, ref, p);
    for (std::size_t l = 0; l < d; ++l) ref[l] = ref[l] - 0.1 * p[l];
  }
  auto run = [&](auto&& alg) {
    for (std::uint32_t t = 0; t < 30; ++t) alg.round(t, oracle, 0.1);
    return alg.model(0);
  };
  REQUIRE(run(sparse_push<double>({x0}, alone, sgp_phases())) == ref);
  REQUIRE(run(sparse_push<double>({x0}, alone, sparse_push_phases(parse_compressor("top-k:0.1"), 0.3))) == ref);
  REQUIRE(run(sparse_push<double>({x0}, alone, scsp_phases(parse_compressor("sign"), 0.1, 25, 5, true))) == ref);
  REQUIRE(run(choco<double>({x0}, alone, {.consensus_step = 0.5, .compressor = parse_compressor("top-k:0.2")})) == ref);
  sparse_push<double> sp1({x0}, alone, sparse_push_phases(parse_compressor("top-k:0.1"), 0.3));
  sp1.round(0, oracle, 0.1);
  REQUIRE(sp1.group().u(0) == 1.0);
}

TEST_CASE("a round in which a node hears from no one keeps mass and still reaches the average", "[gossip]") {
  // round 0: the ring 0 -> 1 -> 2 -> 0; round 1: only 0 -> 1 (node 0 and node 2 hear from no one)
  digraph ring(3), one(3);
  ring.add_edge(0, 1);
  ring.add_edge(1, 2);
  ring.add_edge(2, 0);
  one.add_edge(0, 1);
  const auto sched = time_varying_schedule({ring, one});
  validate_schedule(sched);
  std::vector<out_edge> col;
  std::vector<in_edge> row;
  in_edges_of(sched, 1, 2, row);
  REQUIRE(row == std::vector<in_edge>{{2, 1.0}});  // itself only
  const auto x0 = random_models(3, 20, 5);
  vec avg(20, 0.0);
  for (const auto& x : x0)
    for (std::size_t l = 0; l < 20; ++l) avg[l] += x[l] / 3;
  push_sum_group<vec> g(x0);
  loopback_network net(3);
  for (std::uint32_t t = 0; t < 400; ++t) {
    g.round(sched, identity{}, net, t);
    REQUIRE(std::abs(g.weight_mass() - 3.0) < 1e-12);
  }
  for (std::size_t i = 0; i < 3; ++i)
    for (std::size_t l = 0; l < 20; ++l) REQUIRE(g.debiased(i)[l] == Approx(avg[l]).margin(1e-9));
}

namespace {
/// A user compressor that is top-K (no workspace, no fused step): a group takes the unfused path
/// with it (local step, then the generic v = x + e; q = C(v); e = v - q).
struct user_top_k {
  std::size_t k;
  template <class T>
  void compress(std::span<const T> v, message& m, const context& ctx) const {
    sparsepush::compress(top_k{k_spec::count(k)}, v, m, ctx);
  }
};
}  // namespace

TEST_CASE("a group's fused top-K step gives the unfused step's bits at every node, on 1 and 3 threads", "[gossip]") {
  using fvec = std::vector<float>;
  for (const std::size_t d : {5000u, 100000u}) {  // the radix path and the sampled one
    for (const std::size_t threads : {1u, 3u}) {
      INFO("d " << d << ", threads " << threads);
      const std::size_t n = 6, k = d / 100;
      std::vector<fvec> x0;
      for (std::size_t i = 0; i < n; ++i) x0.push_back(test::gaussian<float>(d, 90 + static_cast<unsigned>(i)));
      push_sum_group<fvec> fused(x0, {.eta = 0.5, .threads = threads, .seed = 3});
      push_sum_group<fvec> plain(x0, {.eta = 0.5, .threads = threads, .seed = 3});
      loopback_network na(n), nb(n);
      const auto sched = parse_schedule("exponential", n);
      REQUIRE(detail::fuses_step(top_k{k_spec::count(k)}));
      REQUIRE_FALSE(detail::fuses_step(user_top_k{k}));
      for (std::uint32_t t = 0; t < 6; ++t) {
        std::vector<fvec> dirs;
        for (std::size_t i = 0; i < n; ++i) dirs.push_back(test::gaussian<float>(d, 1000 * t + static_cast<unsigned>(i)));
        const float gamma = 0.05f * static_cast<float>(t + 1);
        fused.round(sched, top_k{k_spec::count(k)}, na, t, {0.5, dirs, gamma});
        plain.round(sched, user_top_k{k}, nb, t, {0.5, dirs, gamma});
      }
      for (std::size_t i = 0; i < n; ++i) {
        const auto xa = fused.node(i).x(), xb = plain.node(i).x();
        const auto ea = fused.node(i).residual(), eb = plain.node(i).residual();
        REQUIRE(std::memcmp(xa.data(), xb.data(), d * sizeof(float)) == 0);
        REQUIRE(std::memcmp(ea.data(), eb.data(), d * sizeof(float)) == 0);
        REQUIRE(fused.node(i).u() == plain.node(i).u());
      }
      REQUIRE(na.total_bytes() == nb.total_bytes());
    }
  }
}
