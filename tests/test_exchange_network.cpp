// Tests of transport/exchange.hpp: five nodes, each its own algorithm over its own exchange_network
// on its own thread, frames moved through an in-memory mailbox, give the bits and byte counts of
// one algorithm over a loopback (SP top-K, SCSP, CHOCO); hostile exchanges are transport_errors
// naming round, sender and receiver; bad settings are config_errors; the ledger checkpoints.
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <map>
#include <mutex>
#include <random>
#include <thread>
#include <tuple>
#include <sparsepush/sparsepush.hpp>
#include <sparsepush/transport/exchange.hpp>

#include "test_util.hpp"

using namespace sparsepush;

namespace {
using fvec = std::vector<float>;

/// Frames in flight between threads, keyed by (round, from, to).
struct mailbox {
  std::mutex mu;
  std::condition_variable cv;
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, std::vector<std::byte>> frames;

  /// Node `me`'s exchange: file its sends, then wait (10 s at most) for each source's frame.
  frame_exchange exchange_of(std::uint32_t me) {
    return [this, me](std::uint32_t round, std::span<const outgoing_frame> sends,
                      std::span<const std::uint32_t> sources, std::vector<std::vector<std::byte>>& received) {
      {
        std::lock_guard lock(mu);
        for (const auto& s : sends)
          if (!frames.emplace(std::tuple{round, me, s.to}, std::vector<std::byte>(s.bytes.begin(), s.bytes.end()))
                   .second)
            throw std::runtime_error("mailbox: a second frame on one route");
      }
      cv.notify_all();
      std::unique_lock lock(mu);
      for (std::size_t k = 0; k < sources.size(); ++k) {
        const std::tuple key{round, sources[k], me};
        if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return frames.count(key) != 0; }))
          throw std::runtime_error("mailbox: timed out");
        auto it = frames.find(key);
        received[k] = std::move(it->second);
        frames.erase(it);
      }
    };
  }
};

/// A deterministic local direction: pull towards node i's target plus seeded noise of (i, t).
gradient_oracle<float> seeded_oracle(std::size_t d) {
  return [d](std::uint32_t i, std::uint32_t t, std::span<const float> x, std::span<float> p) {
    std::mt19937 gen(1000u * t + i + 17u);
    std::normal_distribution<float> noise(0.0f, 0.1f);
    for (std::size_t l = 0; l < d; ++l) p[l] = x[l] - std::sin(0.05f * float(l * (i + 1))) + noise(gen);
  };
}

bool same_bits(const fvec& a, const fvec& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<fvec> models(std::size_t n, std::size_t d) {
  std::vector<fvec> x;
  for (std::size_t i = 0; i < n; ++i) x.push_back(test::gaussian<float>(d, 40u + static_cast<unsigned>(i)));
  return x;
}

/// What one node ran to: its model, its network's counts, and those of a fresh network restored
/// from the checkpoint of its algorithm.
struct node_result {
  fvec model;
  std::size_t bytes = 0, messages = 0, restored_bytes = 0, restored_messages = 0;
};

/// Runs n nodes, each make(i, net) over its own exchange_network on its own thread, for `rounds`.
template <class Make>
std::vector<node_result> run_threads(std::size_t n, std::uint32_t rounds, const gradient_oracle<float>& oracle,
                                     Make make) {
  mailbox box;
  std::vector<node_result> out(n);
  std::vector<std::exception_ptr> errors(n);
  {
    std::vector<std::jthread> threads;
    for (std::uint32_t i = 0; i < n; ++i)
      threads.emplace_back([&, i] {
        try {
          exchange_network net(n, i, box.exchange_of(i));
          auto alg = make(i, net);
          for (std::uint32_t t = 0; t < rounds; ++t) alg.round(t, oracle, 0.05);
          out[i].model = alg.model(0);
          out[i].bytes = net.total_bytes();
          out[i].messages = net.total_messages();
          checkpoint_writer w;
          alg.save(w);
          const auto file = w.finish();
          checkpoint_reader r(file);
          exchange_network fresh(n, i, box.exchange_of(i));
          auto again = make(i, fresh);
          again.restore(r);
          out[i].restored_bytes = fresh.bytes_sent(i);
          out[i].restored_messages = fresh.messages_sent(i);
        } catch (...) {
          errors[i] = std::current_exception();
        }
      });
  }
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return out;
}

template <class Ref>
void require_same_run(const Ref& ref, const std::vector<node_result>& nodes) {
  std::size_t bytes = 0, messages = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    INFO("node " << i);
    REQUIRE(same_bits(nodes[i].model, ref.model(i)));
    REQUIRE(nodes[i].bytes == ref.network().bytes_sent(i));
    REQUIRE(nodes[i].messages == ref.network().messages_sent(i));
    REQUIRE(nodes[i].restored_bytes == nodes[i].bytes);
    REQUIRE(nodes[i].restored_messages == nodes[i].messages);
    bytes += nodes[i].bytes;
    messages += nodes[i].messages;
  }
  REQUIRE(bytes == ref.bytes_sent());
  REQUIRE(messages == ref.messages_sent());
  REQUIRE(bytes > 0);
}

/// A frame of node `from`'s envelope of `round` (share 0.5, u 1) carrying m.
std::vector<std::byte> frame_of(std::uint32_t from, std::uint32_t round, const message& m) {
  std::vector<std::byte> f;
  encode_envelope({from, round, 0.5, 1.0}, m, f);
  return f;
}

struct thrown_by_the_exchange {};
}  // namespace

TEST_CASE("exchange_network: SP top-K on nodes of their own threads gives a loopback run's bits and bytes",
          "[exchange][transport]") {
  const std::size_t n = 5, d = 300;
  const std::uint32_t rounds = 30;
  const auto x0 = models(n, d);
  const auto oracle = seeded_oracle(d);
  const sparse_push_options opt{.threads = 2, .seed = 9};
  using sp = sparse_push<float, any_compressor, any_schedule, exchange_network>;
  auto check = [&](const any_schedule& sched, const phase_schedule& ph) {
    sparse_push<float> ref(x0, sched, ph, opt);
    for (std::uint32_t t = 0; t < rounds; ++t) ref.round(t, oracle, 0.05);
    const auto nodes = run_threads(n, rounds, oracle, [&](std::uint32_t i, exchange_network& net) {
      return sp({x0[i]}, sched, ph, net, {.seed = 9});
    });
    require_same_run(ref, nodes);
  };
  SECTION("SP, top-K with error feedback, eta 0.05, time-varying exponential graph") {
    check(parse_schedule("exponential", n), sparse_push_phases(parse_compressor("top-k:0.1"), 0.05));
  }
  SECTION("SCSP: top-K+int8, then exact gossip, on random out-peers (in-degrees vary, 0 included)") {
    check(parse_schedule("random:2", n, 4), scsp_phases(parse_compressor("top-k:0.1+int8"), 0.05, 20, 10));
  }
}

TEST_CASE("exchange_network: CHOCO-SGD on nodes of their own threads gives a loopback run's bits and bytes",
          "[exchange][transport]") {
  const std::size_t n = 5, d = 200;
  const std::uint32_t rounds = 8;
  const auto x0 = models(n, d);
  const auto oracle = seeded_oracle(d);
  const auto sched = parse_schedule("undirected-ring", n);
  const choco_options co{.consensus_step = 0.3, .compressor = parse_compressor("top-k:0.2"), .seed = 3};
  choco<float> ref(x0, sched, co);
  for (std::uint32_t t = 0; t < rounds; ++t) ref.round(t, oracle, 0.05);
  const auto nodes = run_threads(n, rounds, oracle, [&](std::uint32_t i, exchange_network& net) {
    return choco<float, any_compressor, any_schedule, exchange_network>({x0[i]}, sched, net, co);
  });
  require_same_run(ref, nodes);
}

TEST_CASE("exchange_network: hostile exchanges are transport_errors naming round, sender and receiver",
          "[exchange][transport]") {
  message m;
  const std::vector<double> v(10, 1.0);
  compress(identity{}, std::span<const double>(v), m, {});
  // node 1 of 3 keeps half and sends half to node 2; it hears from nodes 2 and 0 (listed unsorted)
  const std::vector<out_edge> col{{1, 0.5}, {2, 0.5}};
  const std::vector<in_edge> row{{2, 0.25}, {1, 0.5}, {0, 0.25}};
  auto run = [&](frame_exchange f) {
    exchange_network net(3, 1, std::move(f));
    auto ep = net.endpoint(1);
    ep.post(4, col, 1.0, m);
    inbox box;
    box.dim = 10;
    ep.collect(4, row, box);
    return box;
  };
  SECTION("an honest exchange: sends to node 2 only, sources ascending, envelopes ascending by sender") {
    std::vector<std::uint32_t> seen_sources, seen_to;
    int calls = 0;
    const auto box = run([&](std::uint32_t round, std::span<const outgoing_frame> sends,
                             std::span<const std::uint32_t> sources, std::vector<std::vector<std::byte>>& received) {
      ++calls;
      REQUIRE(round == 4);
      REQUIRE(received.size() == sources.size());
      for (const auto& s : sends) {
        seen_to.push_back(s.to);
        message q;
        const auto h = decode_envelope(s.bytes, q, 10);
        REQUIRE((h.from == 1 && h.round == 4 && h.share == 0.5 && h.u == 1.0));
        REQUIRE(s.bytes.size() == envelope_header_bytes + m.wire_bytes());
      }
      seen_sources.assign(sources.begin(), sources.end());
      for (std::size_t k = 0; k < sources.size(); ++k) received[k] = frame_of(sources[k], round, m);
    });
    REQUIRE(calls == 1);
    REQUIRE(seen_to == std::vector<std::uint32_t>{2});
    REQUIRE(seen_sources == std::vector<std::uint32_t>{0, 2});
    REQUIRE(box.envelopes.size() == 2);
    REQUIRE((box.envelopes[0].from == 0 && box.envelopes[1].from == 2));
    REQUIRE((box.envelopes[0].round == 4 && box.envelopes[0].share == 0.5));
  }
  SECTION("too few frames") {
    REQUIRE_THROWS_MATCHES(run([&](std::uint32_t r, auto, auto, std::vector<std::vector<std::byte>>& received) {
                             received.assign(1, frame_of(0, r, m));
                           }),
                           transport_error,
                           Catch::Matchers::Message(
                               "sparsepush: round 4: node 1 got 1 frames from the exchange for 2 senders"));
  }
  SECTION("too many frames (push_back onto the buffers it was given)") {
    REQUIRE_THROWS_AS(run([&](std::uint32_t r, auto, std::span<const std::uint32_t> sources,
                              std::vector<std::vector<std::byte>>& received) {
                        for (const auto s : sources) received.push_back(frame_of(s, r, m));
                      }),
                      transport_error);
  }
  SECTION("a frame from the wrong sender") {
    REQUIRE_THROWS_WITH(run([&](std::uint32_t r, auto, auto, std::vector<std::vector<std::byte>>& received) {
                          received[0] = frame_of(0, r, m);
                          received[1] = frame_of(0, r, m);
                        }),
                        Catch::Contains("round 4: node 1 received node 0's frame of round 4") &&
                            Catch::Contains("where node 2's of round 4 was due"));
  }
  SECTION("a frame of the wrong round") {
    REQUIRE_THROWS_WITH(run([&](std::uint32_t r, auto, auto, std::vector<std::vector<std::byte>>& received) {
                          received[0] = frame_of(0, r, m);
                          received[1] = frame_of(2, r - 1, m);
                        }),
                        Catch::Contains("round 4: node 1 received node 2's frame of round 3") &&
                            Catch::Contains("where node 2's of round 4 was due"));
  }
  SECTION("truncated garbage") {
    auto bad = [&](std::vector<std::byte> garbage) {
      return [&m, garbage](std::uint32_t r, auto, auto, std::vector<std::vector<std::byte>>& received) {
        received[0] = frame_of(0, r, m);
        received[1] = garbage;
      };
    };
    std::vector<std::byte> cut = frame_of(2, 4, m);
    cut.resize(cut.size() - 3);
    for (const auto& garbage : {std::vector<std::byte>(7, std::byte{0x5a}), cut, std::vector<std::byte>{}}) {
      INFO(garbage.size() << " bytes");
      REQUIRE_THROWS_AS(run(bad(garbage)), transport_error);
      REQUIRE_THROWS_WITH(run(bad(garbage)), Catch::Matches("sparsepush: round 4: node 1 received a malformed frame as "
                                                            "node 2's: sparsepush: decode: .*"));
    }
  }
  SECTION("what the exchange throws reaches the caller unchanged") {
    REQUIRE_THROWS_AS(run([](auto, auto, auto, auto&) { throw thrown_by_the_exchange{}; }), thrown_by_the_exchange);
  }
  SECTION("collect without a post of that round, post twice") {
    exchange_network net(3, 1, [](auto, auto, auto, auto&) {});
    auto ep = net.endpoint(1);
    inbox box;
    REQUIRE_THROWS_WITH(ep.collect(4, row, box), Catch::Contains("round 4: node 1 collects without"));
    ep.post(4, col, 1.0, m);
    REQUIRE_THROWS_WITH(ep.post(5, col, 1.0, m), Catch::Contains("round 5: node 1 posts again") &&
                                                     Catch::Contains("round 4"));
    REQUIRE_THROWS_WITH(ep.collect(5, row, box), Catch::Contains("it posted round 4"));
  }
}

TEST_CASE("exchange_network: bad settings, foreign nodes and deferred policies are config_errors",
          "[exchange][transport]") {
  const frame_exchange none = [](auto, auto, auto, auto&) {};
  REQUIRE_THROWS_AS(exchange_network(0, 0, none), config_error);
  REQUIRE_THROWS_MATCHES(exchange_network(3, 3, none), config_error,
                         Catch::Matchers::Message("sparsepush: exchange network: node 3 outside [0, 3)"));
  REQUIRE_THROWS_WITH(exchange_network(3, 1, frame_exchange{}), Catch::Contains("node 1") && Catch::Contains("empty"));
  exchange_network net(3, 1, none);
  REQUIRE(net.first_node() == 1);
  REQUIRE(net.local_nodes() == 1);
  REQUIRE(net.num_nodes() == 3);
  REQUIRE_THROWS_MATCHES(net.endpoint(2), config_error,
                         Catch::Matchers::Message("sparsepush: exchange network hosts node 1 only, not node 2"));
  // a column naming a node outside the run keeps and counts nothing
  message m;
  const std::vector<double> v(4, 1.0);
  compress(identity{}, std::span<const double>(v), m, {});
  REQUIRE_THROWS(net.endpoint(1).post(0, std::vector<out_edge>{{1, 0.5}, {3, 0.5}}, 1.0, m));
  REQUIRE(net.total_messages() == 0);
  // the policy is known at run time: the algorithm builds, its first round refuses, nothing moves
  const auto sched = parse_schedule("directed-ring", 3);
  const fvec x0 = test::gaussian<float>(16, 5);
  for (const auto policy : {wait_policy::overlap(), wait_policy::staleness(2), wait_policy::asynchronous(2)}) {
    INFO(to_string(policy));
    sparse_push<float, any_compressor, any_schedule, exchange_network> sp(
        {x0}, sched, sparse_push_phases(parse_compressor("top-k:0.25"), 0.5), net, {.policy = policy});
    REQUIRE_THROWS_AS(sp.round(0, seeded_oracle(16), 0.1), config_error);
    REQUIRE_THROWS_WITH(sp.round(0, seeded_oracle(16), 0.1), Catch::Contains("runs lockstep rounds only"));
    REQUIRE(same_bits(sp.model(0), x0));
    REQUIRE(net.total_messages() == 0);
  }
}

TEST_CASE("exchange_network: the byte ledger checkpoints and restores into a fresh network", "[exchange][transport]") {
  message m;
  const std::vector<double> v(12, 2.0);
  compress(identity{}, std::span<const double>(v), m, {});
  const frame_exchange echo = [&m](std::uint32_t r, auto, auto, std::vector<std::vector<std::byte>>& received) {
    received[0] = frame_of(0, r, m);
  };
  exchange_network net(2, 1, echo);
  const std::vector<out_edge> col{{0, 0.5}, {1, 0.5}};
  const std::vector<in_edge> row{{0, 0.5}, {1, 0.5}};
  inbox box;
  for (std::uint32_t t = 0; t < 3; ++t) {
    net.endpoint(1).post(t, col, 1.0, m);
    net.endpoint(1).collect(t, row, box);
  }
  REQUIRE(net.bytes_sent(1) == 3 * (envelope_header_bytes + m.wire_bytes()));
  REQUIRE(net.messages_sent(1) == 3);
  checkpoint_writer w;
  net.save(w);
  const auto file = w.finish();
  {
    checkpoint_reader r(file);
    exchange_network fresh(2, 1, echo);
    auto ledger = fresh.read_ledger(r);
    REQUIRE(fresh.total_bytes() == 0);  // read, not restored yet
    fresh.restore_ledger(std::move(ledger));
    REQUIRE(fresh.bytes_sent(1) == net.bytes_sent(1));
    REQUIRE(fresh.messages_sent(1) == net.messages_sent(1));
    REQUIRE(fresh.total_bytes() == net.total_bytes());
    REQUIRE(fresh.total_messages() == net.total_messages());
    REQUIRE(fresh.messages_dropped() == 0);
  }
  {
    checkpoint_reader r(file);
    exchange_network other(2, 0, echo);  // another node's ledger is refused
    REQUIRE_THROWS_AS(other.read_ledger(r), checkpoint_error);
  }
}
