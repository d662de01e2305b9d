// resilient-store-bench: barrier latency and operation throughput of the
// coordination store with many simulated clients (docs/performance.md).
//
// TCP store (--backend tcp): a store server runs in its own process (or
// --connect names one); each client count is simulated by --processes
// worker processes holding many connections each, driven by one event loop
// per process (load_driver.h).
// etcd (--backend etcd --etcd HOST:PORT,...): with --etcd-driver threads
// the worker processes run one thread per simulated rank, all calling the
// real EtcdStore (etcd_clients.h); with --etcd-driver event each worker
// drives its ranks from one thread over libcurl's multi interface, sending
// the same requests (etcd_event_clients.h).
// Barrier latency is measured from the last arrival (the moment the last
// rank's request is sent) to the last release (the moment the last rank has
// its answer), on CLOCK_MONOTONIC, which all processes share:
//   straggler  every rank but one arrives; once the server has counted them
//              all, the last one arrives (the slow rank a restart waits for)
//   burst      all ranks arrive at once; the last arrival is the last send
// Prints a table, then the same figures as JSON (--json FILE to save them).
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#if defined(RESILIENT_HAVE_ETCD_STORE)
#include "bench/store/etcd_clients.h"
#include "bench/store/etcd_event_clients.h"
#endif
#include "bench/store/load_driver.h"
#include "common/net/socket.h"
#include "store/tcp/protocol.h"
#include "store/tcp/server.h"

namespace {

using namespace resilient::store;
using bench::BarrierTimes;
using bench::monotonicNs;

// A line-oriented pipe pair to a forked process.
struct Channel {
  int toChild = -1;
  int fromChild = -1;
  pid_t pid = -1;
  std::string buffered;

  void send(const std::string& line) const {
    const std::string l = line + "\n";
    if (::write(toChild, l.data(), l.size()) != static_cast<ssize_t>(l.size())) {
      throw std::runtime_error("write to a worker failed");
    }
  }
  std::string receive() {
    for (;;) {
      const size_t nl = buffered.find('\n');
      if (nl != std::string::npos) {
        std::string line = buffered.substr(0, nl);
        buffered.erase(0, nl + 1);
        return line;
      }
      char buf[512];
      const ssize_t n = ::read(fromChild, buf, sizeof buf);
      if (n <= 0) {
        throw std::runtime_error("a worker process exited early");
      }
      buffered.append(buf, static_cast<size_t>(n));
    }
  }
};

// Forks a process running `body(in, out)` with line pipes to the parent.
template <class Body>
Channel forkProcess(Body body) {
  int down[2];
  int up[2];
  if (::pipe(down) != 0 || ::pipe(up) != 0) {
    throw std::runtime_error("pipe failed");
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid < 0) {
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {
    ::close(down[1]);
    ::close(up[0]);
    int rc = 0;
    try {
      Channel self{up[1], down[0], 0, {}};
      body(self);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "resilient-store-bench: worker %d: %s\n", ::getpid(), e.what());
      rc = 1;
    }
    std::fflush(nullptr);
    ::_exit(rc);
  }
  ::close(down[0]);
  ::close(up[1]);
  return Channel{down[1], up[0], pid, {}};
}

void raiseFdLimit(size_t need) {
  rlimit rl{};
  ::getrlimit(RLIMIT_NOFILE, &rl);
  rl.rlim_cur = rl.rlim_max;
  ::setrlimit(RLIMIT_NOFILE, &rl);
  if (rl.rlim_cur < need) {
    std::fprintf(stderr,
                 "resilient-store-bench: warning: fd limit %llu is below the %zu the server "
                 "needs; raise the hard limit (ulimit -Hn)\n",
                 static_cast<unsigned long long>(rl.rlim_cur), need);
  }
}

std::vector<std::string> split(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) {
    out.push_back(w);
  }
  return out;
}

// What a worker process drives: TCP connections or etcd client threads.
class Clients {
 public:
  virtual ~Clients() = default;
  virtual void startBarrier(const std::string& name, uint64_t gen, int world, bool hold,
                            BarrierTimes* t) = 0;
  virtual void startHeld(BarrierTimes* t) = 0;
  virtual void awaitReleases(BarrierTimes* t) = 0;
  virtual uint64_t runOps(const std::string& op, int durationMs) = 0;
};

class TcpClients final : public Clients {
 public:
  TcpClients(const bench::LoadDriverOptions& options, int batchUs) : driver_(options) {
    driver_.setBatchUs(batchUs);
  }
  void startBarrier(const std::string& name, uint64_t gen, int world, bool hold,
                    BarrierTimes* t) override {
    driver_.sendBarrier(name, gen, world, hold, t);
  }
  void startHeld(BarrierTimes* t) override { driver_.sendHeld(t); }
  void awaitReleases(BarrierTimes* t) override { driver_.awaitReleases(t, 120000); }
  uint64_t runOps(const std::string& op, int durationMs) override {
    const tcp::Op o = op == "set" ? tcp::Op::kSet : op == "get" ? tcp::Op::kGet : tcp::Op::kAdd;
    return driver_.runOps(o, durationMs);
  }

 private:
  bench::LoadDriver driver_;
};

#if defined(RESILIENT_HAVE_ETCD_STORE)
// The etcd drivers (a thread per rank, or libcurl multi) behind Clients:
// both have Clients' operations, so one forwarding adapter serves them.
template <class Driver>
class EtcdWorkerClients final : public Clients {
 public:
  template <class... Args>
  explicit EtcdWorkerClients(Args&&... args) : clients_(std::forward<Args>(args)...) {}
  void startBarrier(const std::string& name, uint64_t gen, int world, bool hold,
                    BarrierTimes* t) override {
    clients_.startBarrier(name, gen, world, hold, t);
  }
  void startHeld(BarrierTimes* t) override { clients_.startHeld(t); }
  void awaitReleases(BarrierTimes* t) override { clients_.awaitReleases(t); }
  uint64_t runOps(const std::string& op, int durationMs) override {
    return clients_.runOps(op, durationMs);
  }

 private:
  Driver clients_;
};
#endif

// The worker: connects, then obeys commands until told to quit.
void workerMain(Channel& parent, Clients& clients) {
  parent.send("ready");
  BarrierTimes times;
  for (;;) {
    const std::vector<std::string> cmd = split(parent.receive());
    if (cmd.empty() || cmd[0] == "Q") {
      return;
    }
    if (cmd[0] == "B") {  // B name generation world hold
      clients.startBarrier(cmd[1], std::stoull(cmd[2]), std::stoi(cmd[3]), cmd[4] == "1", &times);
      parent.send("sent " + std::to_string(times.lastSendNs));
    } else if (cmd[0] == "H") {
      clients.startHeld(&times);
    } else if (cmd[0] == "W") {
      clients.awaitReleases(&times);
      parent.send("rel " + std::to_string(times.lastSendNs) + " " +
                  std::to_string(times.firstReleaseNs) + " " + std::to_string(times.lastReleaseNs) +
                  " " + std::to_string(times.released) + " " + std::to_string(times.errors));
    } else if (cmd[0] == "O") {  // O op durationMs
      parent.send("ops " + std::to_string(clients.runOps(cmd[1], std::stoi(cmd[2]))));
    }
  }
}

// Where the benchmark's store is, and how to make a worker's clients.
struct Target {
  std::string backend = "tcp";
  std::string host;
  uint16_t port = 0;
  std::string token;
  std::vector<std::string> etcd;
  std::string etcdDriver = "threads";
  int batchUs = 0;
  int ranksPerClient = 1;

  std::unique_ptr<Clients> clients(int n, int first, int processIndex) const {
    if (backend == "etcd") {
#if defined(RESILIENT_HAVE_ETCD_STORE)
      if (etcdDriver == "event") {
        // Each worker its own loopback source address, as for the TCP store.
        const std::string source =
            etcd.front().rfind("127.", 0) == 0 ? "127.0.0." + std::to_string(2 + processIndex) : "";
        return std::make_unique<EtcdWorkerClients<bench::EtcdEventClients>>(etcd, n, first, source,
                                                                            ranksPerClient);
      }
      return std::make_unique<EtcdWorkerClients<bench::EtcdClients>>(etcd, n, first);
#else
      throw std::runtime_error("this build has no etcd backend");
#endif
    }
    // Each worker its own loopback source address: 127.0.0.2, .3, ...
    const std::string source =
        host.rfind("127.", 0) == 0 ? "127.0.0." + std::to_string(2 + processIndex) : "";
    return std::make_unique<TcpClients>(bench::LoadDriverOptions{.host = host,
                                                                 .port = port,
                                                                 .token = token,
                                                                 .connections = n,
                                                                 .firstRank = first,
                                                                 .sourceIp = source},
                                        batchUs);
  }
};

// The coordinator's view of a barrier: how many ranks are counted. Marking
// rank 0, already counted by its own arrival or counted now, changes nothing.
class Probe {
 public:
  explicit Probe(const Target& t) {
    if (t.backend == "etcd") {
#if defined(RESILIENT_HAVE_ETCD_STORE)
      ClientOptions o;
      // Behind thousands of arrivals, etcd answers late: the probe waits as
      // long as the simulated clients do.
      o.memberTimeout = Millis(1200000);
      o.defaultTimeout = Millis(1800000);
      etcd_ = std::make_unique<etcd::EtcdStore>(t.etcd, o);
#else
      throw std::runtime_error("this build has no etcd backend");
#endif
    } else {
      tcp_ = std::make_unique<bench::BlockingConn>(t.host, t.port, t.token);
    }
  }
  uint32_t arrived(const std::string& name, uint64_t gen, int world) {
#if defined(RESILIENT_HAVE_ETCD_STORE)
    if (etcd_) {
      return etcd_->barrier({name, gen, 0, world, false}).arrived;
    }
#endif
    tcp::StoreRequest mark;
    mark.op = tcp::Op::kBarrier;
    mark.arrival = {name, gen, 0, world, false};
    return tcp_->call(mark).barrier.arrived;
  }

 private:
  std::unique_ptr<bench::BlockingConn> tcp_;
#if defined(RESILIENT_HAVE_ETCD_STORE)
  std::unique_ptr<etcd::EtcdStore> etcd_;
#endif
};

struct Summary {
  double median = 0;
  double p90 = 0;
  double min = 0;
  double max = 0;
};

Summary summarize(std::vector<double> v) {
  Summary s;
  if (v.empty()) {
    return s;
  }
  std::sort(v.begin(), v.end());
  s.median = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
  s.p90 = v[std::min(v.size() - 1, (v.size() * 9) / 10)];
  s.min = v.front();
  s.max = v.back();
  return s;
}

struct Row {
  int clients = 0;
  int processes = 0;
  double connectSeconds = 0;
  Summary straggler;
  Summary burst;
  double firstToLastReleaseMs = 0;  // straggler, median
  double arrivalsSeconds = 0;       // straggler: first send to n-1 counted, median
  double setOps = 0;
  double getOps = 0;
  double addOps = 0;
};

// One row of the table: `clients` clients in `processes` processes.
struct RunOptions {
  int clients = 1;
  int processes = 1;
  int rounds = 0;         // measured barrier rounds of each kind
  int warmup = 0;         // unmeasured rounds before them
  int opsMs = 0;          // how long each set/get/add throughput test runs; 0: none
  bool straggler = true;  // rounds where every client but one arrives first
  bool burst = true;      // rounds where all clients arrive at once
};

// `clients` clients spread over `processes` forked processes, each connected.
std::vector<Channel> startWorkers(const Target& target, int clients, int processes) {
  std::vector<Channel> workers;
  int rank = 0;
  for (int p = 0; p < processes; ++p) {
    const int n = clients / processes + (p < clients % processes ? 1 : 0);
    workers.push_back(forkProcess([&, n, rank, p](Channel& self) {
      ::prctl(PR_SET_NAME, "bench-clients");
      std::unique_ptr<Clients> c = target.clients(n, rank, p);
      workerMain(self, *c);
    }));
    rank += n;
  }
  for (auto& w : workers) {
    if (w.receive() != "ready") {
      throw std::runtime_error("a worker failed to connect");
    }
  }
  return workers;
}

// The barrier rounds of one row, each a fresh generation of the same barrier.
class BarrierRounds {
 public:
  BarrierRounds(const Target& target, std::vector<Channel>& workers, int clients)
      : target_(target),
        workers_(workers),
        clients_(clients),
        world_(clients * target.ranksPerClient),
        probe_(target),
        name_("bench/" + std::to_string(clients) + "/" + std::to_string(::getpid())) {}

  // Every client but worker 0's first one arrives; once the store counted them,
  // the held one does. Adds the round's numbers when `measured`.
  void straggler(bool measured) {
    const uint64_t g = gen_++;
    const uint64_t roundStart = monotonicNs();
    for (size_t i = 0; i < workers_.size(); ++i) {
      workers_[i].send("B " + name_ + " " + std::to_string(g) + " " + std::to_string(world_) +
                       (i == 0 ? " 1" : " 0"));
    }
    for (auto& w : workers_) {
      w.receive();  // sent
    }
    if (clients_ > 1) {
      awaitAllButHeld(g);
      if (measured) {
        arrivalsS_.push_back(static_cast<double>(monotonicNs() - roundStart) / 1e9);
      }
      // The others have been waiting: let the machine settle first (the
      // TCP stack's delayed ACKs of the previous round fire within 200 ms;
      // etcd's watches start right after each arrival), so the straggler's
      // release is measured on its own, as in a job between two steps.
      std::this_thread::sleep_for(std::chrono::milliseconds(target_.backend == "etcd" ? 500 : 250));
    }
    workers_[0].send("H");
    for (auto& w : workers_) {
      w.send("W");
    }
    // The held send time comes back as worker 0's lastSendNs.
    uint64_t held = 0;
    uint64_t lastRelease = 0;
    uint64_t firstRelease = UINT64_MAX;
    uint64_t released = 0;
    for (size_t i = 0; i < workers_.size(); ++i) {
      const std::vector<std::string> r = split(workers_[i].receive());
      if (i == 0) {
        held = std::stoull(r[1]);
      }
      firstRelease = std::min<uint64_t>(firstRelease, std::stoull(r[2]));
      lastRelease = std::max<uint64_t>(lastRelease, std::stoull(r[3]));
      released += std::stoull(r[4]);
      if (std::stoull(r[5]) != 0) {
        throw std::runtime_error("barrier errors");
      }
    }
    if (released != static_cast<uint64_t>(clients_)) {
      throw std::runtime_error("straggler round incomplete");
    }
    if (measured) {
      stragglerMs_.push_back(static_cast<double>(lastRelease - held) / 1e6);
      spreadMs_.push_back(static_cast<double>(lastRelease - firstRelease) / 1e6);
    }
  }

  // Every client arrives at once. Adds the round's number when `measured`.
  void burst(bool measured) {
    const uint64_t g = gen_++;
    for (auto& w : workers_) {
      w.send("B " + name_ + " " + std::to_string(g) + " " + std::to_string(world_) + " 0");
      w.send("W");
    }
    for (auto& w : workers_) {
      w.receive();  // sent
    }
    // The last arrival is the last send of any worker.
    uint64_t lastArrival = 0;
    uint64_t lastRelease = 0;
    uint64_t released = 0;
    uint64_t errors = 0;
    for (auto& w : workers_) {
      const std::vector<std::string> r = split(w.receive());
      if (r.size() != 6 || r[0] != "rel") {
        throw std::runtime_error("unexpected worker answer");
      }
      lastArrival = std::max<uint64_t>(lastArrival, std::stoull(r[1]));
      lastRelease = std::max<uint64_t>(lastRelease, std::stoull(r[3]));
      released += std::stoull(r[4]);
      errors += std::stoull(r[5]);
    }
    if (released != static_cast<uint64_t>(clients_) || errors != 0) {
      throw std::runtime_error("barrier round incomplete: " + std::to_string(released) + " of " +
                               std::to_string(clients_) + " released, " + std::to_string(errors) +
                               " errors");
    }
    if (measured) {
      burstMs_.push_back(static_cast<double>(lastRelease - lastArrival) / 1e6);
    }
  }

  void summarizeInto(Row& row) const {
    row.straggler = summarize(stragglerMs_);
    row.burst = summarize(burstMs_);
    row.firstToLastReleaseMs = summarize(spreadMs_).median;
    row.arrivalsSeconds = summarize(arrivalsS_).median;
  }

 private:
  // Waits until the store has counted every rank but the held one.
  void awaitAllButHeld(uint64_t g) {
    const uint64_t giveUp = monotonicNs() + 1800ull * 1000000000ull;
    const int held = target_.ranksPerClient;  // the held client's ranks
    while (probe_.arrived(name_, g, world_) < static_cast<uint32_t>(world_ - held)) {
      if (monotonicNs() > giveUp) {
        throw std::runtime_error("ranks did not all arrive within 1800 s");
      }
      // etcd: each probe is a transaction queued behind thousands of
      // arrivals, so it polls less often, not to compete with them.
      std::this_thread::sleep_for(std::chrono::milliseconds(target_.backend == "etcd" ? 100 : 2));
    }
  }

  const Target& target_;
  std::vector<Channel>& workers_;
  const int clients_;
  const int world_;  // ranks: clients_ x ranks per client
  Probe probe_;
  const std::string name_;
  uint64_t gen_ = 0;
  std::vector<double> stragglerMs_;
  std::vector<double> burstMs_;
  std::vector<double> spreadMs_;
  std::vector<double> arrivalsS_;
};

// The set, get and add throughput of every client together, each for `opsMs`.
void measureOps(std::vector<Channel>& workers, int opsMs, Row& row) {
  for (const char* op : {"set", "get", "add"}) {
    // Every operation completed counts, those still in flight at the end
    // of the window included, over the time until the last one finished:
    // a call slower than the window (etcd with thousands of clients) is
    // not lost from the rate.
    uint64_t total = 0;
    const uint64_t start = monotonicNs();
    for (auto& w : workers) {
      w.send(std::string("O ") + op + " " + std::to_string(opsMs));
    }
    for (auto& w : workers) {
      total += std::stoull(split(w.receive())[1]);
    }
    const double seconds = static_cast<double>(monotonicNs() - start) / 1e9;
    const double rate = static_cast<double>(total) / seconds;
    (std::string(op) == "set"   ? row.setOps
     : std::string(op) == "get" ? row.getOps
                                : row.addOps) = rate;
  }
}

Row runOne(const Target& target, const RunOptions& run) {
  const int clients = run.clients;
  const int processes = std::max(1, std::min(run.processes, clients));
  Row row;
  row.clients = clients;
  row.processes = processes;
  const uint64_t t0 = monotonicNs();
  std::vector<Channel> workers = startWorkers(target, clients, processes);
  row.connectSeconds = static_cast<double>(monotonicNs() - t0) / 1e9;
  BarrierRounds rounds(target, workers, clients);
  // Warm-up rounds (not counted): first-touch allocations on both sides.
  for (int round = -run.warmup; round < run.rounds; ++round) {
    if (run.straggler) {
      rounds.straggler(round >= 0);
    }
    if (run.burst) {
      rounds.burst(round >= 0);
    }
  }
  rounds.summarizeInto(row);
  if (run.opsMs > 0) {
    measureOps(workers, run.opsMs, row);
  }
  for (auto& w : workers) {
    w.send("Q");
    int status = 0;
    ::waitpid(w.pid, &status, 0);
    ::close(w.toChild);
    ::close(w.fromChild);
  }
  return row;
}

std::string machine() {
  utsname u{};
  ::uname(&u);
  return std::string(u.sysname) + " " + u.release + ", " +
         std::to_string(std::thread::hardware_concurrency()) + " cpus";
}

// The command line.
struct BenchArgs {
  std::vector<int> clientCounts{64, 1024, 4096, 16384};
  int processes = 4;
  int rounds = 20;
  int warmup = 1;
  int opsMs = 2000;
  std::string mode = "both";
  std::string jsonPath;
  std::string connect;
  std::string token = "bench-token";
  int sendThreads = -1;
  std::string backend = "tcp";
  std::string etcdEndpoints;
  std::string etcdDriver = "threads";
  int ranksPerClient = 1;
  // A simulated client process polls its connections about once per
  // millisecond during a release instead of being woken per reply: a real
  // rank is on its own host and costs the server's cores no wake-up, and a
  // release time is taken when the reply is read, so polling only adds.
  int batchUs = 1000;
};

void addOptions(CLI::App& app, BenchArgs& a) {
  app.add_option("--client-batch-us", a.batchUs,
                 "TCP: a simulated client process sleeps this long after handling a batch of "
                 "releases before its next wait (0: woken per reply)")
      ->capture_default_str();
  app.add_option("--backend", a.backend, "tcp or etcd")->capture_default_str();
  app.add_option("--etcd", a.etcdEndpoints, "etcd members HOST:PORT,... (--backend etcd)");
  app.add_option("--etcd-driver", a.etcdDriver,
                 "etcd: 'threads' (a thread per rank calling EtcdStore) or 'event' (every rank of "
                 "a worker on one thread over libcurl multi, the same requests)")
      ->check(CLI::IsMember({"threads", "event"}))
      ->capture_default_str();
  app.add_option("--ranks-per-client", a.ranksPerClient,
                 "etcd event driver: each client is a node agent arriving at a barrier for this "
                 "many ranks in one arrival and one watch (store/proxy/node_proxy.h); the "
                 "barrier's world is clients x this")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  app.add_option("--clients", a.clientCounts, "simulated client counts")
      ->delimiter(',')
      ->capture_default_str();
  app.add_option("--processes", a.processes, "worker processes per client count")
      ->capture_default_str();
  app.add_option("--rounds", a.rounds, "barrier rounds per mode and count")->capture_default_str();
  app.add_option("--warmup", a.warmup, "uncounted warm-up rounds before them")
      ->capture_default_str();
  app.add_option("--ops-ms", a.opsMs, "duration of each throughput run (0: skip)")
      ->capture_default_str();
  app.add_option("--mode", a.mode, "straggler, burst or both")->capture_default_str();
  app.add_option("--json", a.jsonPath, "also write the results as JSON to this file");
  app.add_option("--connect", a.connect,
                 "HOST:PORT of a running resilient-store (default: fork one)");
  app.add_option("--token", a.token, "job token")->capture_default_str();
  app.add_option("--send-threads", a.sendThreads,
                 "server helper threads for reply bursts (-1: one per extra core, at most 3)")
      ->capture_default_str();
}

// The store the clients use: etcd's members, a running resilient-store, or
// (by default) a TCP store server forked here, whose channel is returned.
Channel startTarget(const BenchArgs& a, Target& target) {
  target.backend = a.backend;
  target.host = "127.0.0.1";
  target.token = a.token;
  target.batchUs = a.batchUs;
  target.etcdDriver = a.etcdDriver;
  target.ranksPerClient = a.ranksPerClient;
  if (a.ranksPerClient > 1 && (a.backend != "etcd" || a.etcdDriver != "event")) {
    throw CLI::ValidationError("--ranks-per-client",
                               "clients arriving for several ranks: --backend etcd --etcd-driver "
                               "event only");
  }
  Channel server;
  if (a.backend == "etcd") {
    std::istringstream in(a.etcdEndpoints);
    for (std::string ep; std::getline(in, ep, ',');) {
      if (!ep.empty()) {
        target.etcd.push_back(ep);
      }
    }
    if (target.etcd.empty()) {
      throw CLI::ValidationError("--etcd", "the etcd backend needs --etcd HOST:PORT,...");
    }
  } else if (a.backend != "tcp") {
    throw CLI::ValidationError("--backend", "tcp or etcd");
  } else if (a.connect.empty()) {
    // The server in a process of its own, as in a job (launcher or monitor).
    server = forkProcess([&](Channel& self) {
      tcp::ServerOptions o;
      o.host = target.host;
      o.token = a.token;
      o.sendThreads = a.sendThreads;
      tcp::StoreServer srv(o);
      self.send(std::to_string(srv.port()));
      self.receive();  // until told to stop (or the parent's end closes)
    });
    target.port = static_cast<uint16_t>(std::stoi(server.receive()));
  } else {
    const resilient::HostPort hp = valueOrThrow(resilient::parseHostPort(a.connect));
    target.host = hp.host;
    target.port = hp.port;
  }
  return server;
}

void printTableHead(const BenchArgs& a, const Target& target) {
  if (a.backend == "etcd") {
    std::printf("etcd store benchmark: %s, driver %s, %d rank(s) per client, %s\n",
                a.etcdEndpoints.c_str(), a.etcdDriver.c_str(), a.ranksPerClient,
                machine().c_str());
  } else {
    std::printf("TCP store benchmark: server %s:%u (send threads %d, client batch %d us), %s\n",
                target.host.c_str(), target.port, a.sendThreads, a.batchUs, machine().c_str());
  }
  std::printf("%8s %5s %9s | %-27s | %-27s | %9s | %10s %10s %10s\n", "clients", "procs",
              "connect s", "straggler ms med/p90/max", "burst ms med/p90/max", "spread ms",
              "set op/s", "get op/s", "add op/s");
}

void printRow(const BenchArgs& a, int n, const Row& r) {
  std::printf(
      "%8d %5d %9.2f | %8.2f %8.2f %9.2f | %8.2f %8.2f %9.2f | %9.2f | %10.0f %10.0f %10.0f\n",
      r.clients, r.processes, r.connectSeconds, r.straggler.median, r.straggler.p90,
      r.straggler.max, r.burst.median, r.burst.p90, r.burst.max, r.firstToLastReleaseMs, r.setOps,
      r.getOps, r.addOps);
  if (a.mode != "burst" && n > 1) {
    std::printf("%8s straggler rounds: %d-1 ranks counted %.2f s after the round began (median)\n",
                "", n, r.arrivalsSeconds);
  }
  std::fflush(stdout);
}

std::string resultsJson(const BenchArgs& a, const std::vector<Row>& rows) {
  std::ostringstream json;
  json << "{\"benchmark\":\"" << a.backend << "-store\",\"machine\":\"" << machine()
       << "\",\"etcd_driver\":\"" << (a.backend == "etcd" ? a.etcdDriver : std::string("-"))
       << "\",\"ranks_per_client\":" << a.ranksPerClient << ",\"send_threads\":" << a.sendThreads << ",\"client_batch_us\":" << a.batchUs
       << ",\"rounds\":" << a.rounds << ",\"ops_ms\":" << a.opsMs << ",\"results\":[";
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    json << (i ? "," : "") << "{\"clients\":" << r.clients << ",\"processes\":" << r.processes
         << ",\"connect_s\":" << r.connectSeconds
         << ",\"straggler_ms\":{\"median\":" << r.straggler.median << ",\"p90\":" << r.straggler.p90
         << ",\"max\":" << r.straggler.max << "},\"burst_ms\":{\"median\":" << r.burst.median
         << ",\"p90\":" << r.burst.p90 << ",\"max\":" << r.burst.max
         << "},\"release_spread_ms\":" << r.firstToLastReleaseMs
         << ",\"straggler_arrivals_s\":" << r.arrivalsSeconds
         << ",\"ops_per_s\":{\"set\":" << r.setOps << ",\"get\":" << r.getOps
         << ",\"add\":" << r.addOps << "}}";
  }
  json << "]}";
  return json.str();
}

int run(int argc, char** argv) {
  CLI::App app{"Barrier latency and ops/s of the store with many simulated clients."};
  BenchArgs a;
  addOptions(app, a);
  CLI11_PARSE(app, argc, argv);

  const int maxClients = *std::max_element(a.clientCounts.begin(), a.clientCounts.end());
  raiseFdLimit(static_cast<size_t>(maxClients) + 64);
  ::signal(SIGPIPE, SIG_IGN);

  Target target;
  Channel server = startTarget(a, target);
  std::vector<Row> rows;
  printTableHead(a, target);
  for (int n : a.clientCounts) {
    Row r = runOne(target, {.clients = n,
                            .processes = a.processes,
                            .rounds = a.rounds,
                            .warmup = a.warmup,
                            .opsMs = a.opsMs,
                            .straggler = a.mode != "burst",
                            .burst = a.mode != "straggler"});
    printRow(a, n, r);
    rows.push_back(r);
  }
  if (server.pid > 0) {
    server.send("stop");
    int status = 0;
    ::waitpid(server.pid, &status, 0);
  }

  const std::string json = resultsJson(a, rows);
  std::printf("%s\n", json.c_str());
  if (!a.jsonPath.empty()) {
    std::ofstream(a.jsonPath) << json << "\n";
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resilient-store-bench: %s\n", e.what());
    return 1;
  }
}
