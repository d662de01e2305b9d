#include "tests/unit/hostengine/rank_threads.h"

#include <algorithm>
#include <thread>

#include <catch2/catch.hpp>

#include "common/net/socket.h"
#include "common/net/socket_address.h"
#include "hostengine/rendezvous.h"

namespace resilient::test {

namespace he = hostengine;

void runRankThreads(int n, const RankBody& body) {
  auto fd = listenOn("127.0.0.1", 0, {.backlog = 64, .reuseAddress = true});
  REQUIRE(fd.ok());
  auto server =
      he::RendezvousServer::start(std::move(fd).value(), static_cast<uint32_t>(n), kToken);
  REQUIRE(server.ok());
  auto address = resolveAddress("127.0.0.1", (*server)->port());
  REQUIRE(address.ok());
  std::vector<std::thread> threads;
  threads.reserve(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] {
      auto client = he::RendezvousClient::connect(*address, {.rank = static_cast<uint32_t>(r),
                                                             .worldSize = static_cast<uint32_t>(n),
                                                             .token = kToken,
                                                             .timeoutMs = 10000});
      if (!client.ok()) {
        body(r, nullptr, client.status());
        return;
      }
      body(r, client->get(), Status());
    });
  }
  for (auto& t : threads) {
    t.join();
  }
}

std::vector<RankRun> runRanks(int n, he::Pattern pattern, const std::vector<size_t>& sizes,
                              const std::function<transport::Transport&(int)>& transportFor,
                              he::EngineOptions base) {
  size_t maxBytes = 0;
  for (size_t s : sizes) {
    maxBytes = std::max(maxBytes, s);
  }
  std::vector<RankRun> runs(static_cast<size_t>(n));
  runRankThreads(n, [&](int r, he::RendezvousClient* client, const Status& joined) {
    RankRun& run = runs[static_cast<size_t>(r)];
    if (client == nullptr) {
      he::Fault f;
      f.call = "rendezvous";
      f.status = joined;
      run.setupFault = f;
      return;
    }
    he::EngineOptions o = base;
    o.rank = r;
    o.nranks = n;
    o.pattern = pattern;
    he::Engine engine(transportFor(r), *client, o);
    run.setupFault = engine.setup(maxBytes);
    if (run.setupFault) {
      client->abort("setup failed");
      return;
    }
    run.pieces = engine.piecesPerItem();
    uint64_t iteration = 0;
    for (size_t size : sizes) {
      for (int i = 0; i < 2; ++i) {
        run.results.push_back(engine.run(size, iteration++, {.barrier = true}));
        if (run.results.back().fault) {
          client->abort("fault");
          engine.close();
          return;
        }
      }
    }
    engine.close();
    (void)client->finish();
  });
  return runs;
}

void requireClean(const std::vector<RankRun>& runs) {
  for (size_t r = 0; r < runs.size(); ++r) {
    CAPTURE(r);
    if (runs[r].setupFault) {
      FAIL(runs[r].setupFault->describe());
    }
    for (const auto& result : runs[r].results) {
      if (result.fault) {
        FAIL(result.fault->describe());
      }
      CHECK(result.errors == 0);
    }
  }
}

}  // namespace resilient::test
