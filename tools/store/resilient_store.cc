// resilient-store: the TCP coordination store server as a standalone
// process, and a small client for scripts and drills.
//
//   resilient-store --listen 0.0.0.0:29500 --token-file /run/job.token
//       serves until SIGINT/SIGTERM; prints "resilient-store serving tcp://HOST:PORT"
//   resilient-store client --store tcp://host:29500 set KEY VALUE
//   resilient-store client --store etcd://a:2379,b:2379 barrier NAME GEN RANK WORLD
//
// The job token defaults to NCCL_RESILIENT_JOB_TOKEN; --token-file keeps it
// out of the process list. Exit status: 0 ok, 1 store error, 2 usage.
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/log.h"
#include "common/net/socket.h"
#include "common/params.h"
#include "store/errors.h"
#include "store/open_store.h"
#include "store/tcp/server.h"

namespace {

using namespace resilient;
using namespace resilient::store;

std::string readTokenFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw std::runtime_error("cannot read token file " + path);
  }
  std::ostringstream s;
  s << in.rdbuf();
  std::string token = s.str();
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r')) {
    token.pop_back();
  }
  return token;
}

void applyLogLevel(const std::string& level) {
  if (level.empty()) {
    return;
  }
  std::optional<log::Level> parsed = log::parseLevel(level);
  if (!parsed) {
    throw CLI::ValidationError("--log-level", "expected NONE, WARN, INFO or TRACE");
  }
  log::configure(*parsed, log::subsystemMask());
}

std::string servedHost(const std::string& listenHost) {
  if (listenHost == "0.0.0.0" || listenHost == "::" || listenHost.empty()) {
    char host[256] = {0};
    if (::gethostname(host, sizeof host - 1) == 0) {
      return host;
    }
  }
  return listenHost;
}

// Serves on `listen` (HOST:PORT) with `options` (their host and port are taken from `listen`).
int serve(const std::string& listen, tcp::ServerOptions options) {
  // Block the stop signals before the server thread exists, then wait for one.
  sigset_t stopSignals;
  sigemptyset(&stopSignals);
  sigaddset(&stopSignals, SIGINT);
  sigaddset(&stopSignals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stopSignals, nullptr);

  const HostPort hp = store::valueOrThrow(parseHostPort(listen, "0.0.0.0"));
  options.host = hp.host;
  options.port = hp.port;
  tcp::StoreServer server(options);
  std::printf("resilient-store serving tcp://%s (bound %s, token %s)\n",
              formatHostPort(servedHost(hp.host), server.port()).c_str(), server.address().c_str(),
              options.token.empty() ? "not checked" : "required");
  std::fflush(stdout);
  int sig = 0;
  sigwait(&stopSignals, &sig);
  const tcp::ServerStats s = server.stats();
  std::fprintf(stderr,
               "resilient-store: signal %d, stopping (%llu connections accepted, %llu requests, "
               "%llu refused for the token, %llu for the protocol)\n",
               sig, static_cast<unsigned long long>(s.connectionsAccepted),
               static_cast<unsigned long long>(s.requests),
               static_cast<unsigned long long>(s.refusedToken),
               static_cast<unsigned long long>(s.refusedProtocol));
  server.stop();
  return 0;
}

int runClient(const std::string& url, const ClientOptions& options,
              const std::vector<std::string>& args, int64_t timeoutMs, bool noWait) {
  if (args.empty()) {
    throw CLI::ValidationError("client", "missing operation");
  }
  const std::string& op = args[0];
  const auto need = [&](size_t n) {
    if (args.size() != n + 1) {
      throw CLI::ValidationError(op, "expects " + std::to_string(n) + " arguments");
    }
  };
  const Timeout timeout = timeoutMs >= 0 ? Timeout(Millis(timeoutMs)) : Timeout();
  std::shared_ptr<Store> s = openStore(url, options);
  if (op == "set") {
    need(2);
    s->set(args[1], args[2], timeout);
  } else if (op == "get") {
    need(1);
    std::optional<std::string> v = s->get(args[1], timeout);
    if (!v) {
      std::fprintf(stderr, "key '%s' is absent\n", args[1].c_str());
      return 1;
    }
    std::printf("%s\n", v->c_str());
  } else if (op == "add") {
    need(2);
    std::printf("%lld\n", static_cast<long long>(s->add(args[1], std::stoll(args[2]), timeout)));
  } else if (op == "remove") {
    need(1);
    std::printf("%s\n", s->remove(args[1], timeout) ? "removed" : "absent");
  } else if (op == "wait") {
    if (args.size() < 2) {
      throw CLI::ValidationError(op, "expects keys");
    }
    s->wait(std::vector<std::string>(args.begin() + 1, args.end()), timeout);
  } else if (op == "barrier") {
    need(4);
    BarrierArrival a{args[1], std::stoull(args[2]), std::stoi(args[3]), std::stoi(args[4]),
                     !noWait};
    BarrierResult r = s->barrier(a, timeout);
    std::printf("%s: arrival %u, %u ranks counted\n", r.completed ? "released" : "counted",
                r.arrivalIndex, r.arrived);
  } else if (op == "ping") {
    need(0);
    s->check({"ping"}, timeout);
    std::printf("ok %s\n", s->describe().c_str());
  } else {
    throw CLI::ValidationError(op,
                               "unknown operation (set, get, add, remove, wait, barrier, ping)");
  }
  std::fflush(stdout);
  return 0;
}

int run(int argc, char** argv) {
  CLI::App app{"The resilient coordination store: serves the TCP store, or acts as its client."};
  std::string listen = "0.0.0.0:29500";
  std::string token;
  std::string tokenFile;
  std::string logLevel;
  size_t maxConnections = 1u << 20;
  size_t maxFrameBytes = tcp::kDefaultMaxFrameBytes;
  int sendThreads = -1;
  app.add_option("-l,--listen", listen, "address to listen on: HOST:PORT, [V6]:PORT or PORT")
      ->capture_default_str();
  app.add_option("--token", token,
                 "job token clients must present (default: NCCL_RESILIENT_JOB_TOKEN)");
  app.add_option("--token-file", tokenFile, "read the job token from this file");
  app.add_option("--log-level", logLevel,
                 "NONE, WARN, INFO or TRACE (default: NCCL_RESILIENT_LOG_LEVEL)");
  app.add_option("--max-connections", maxConnections, "refuse clients beyond this many")
      ->capture_default_str();
  app.add_option("--max-frame-bytes", maxFrameBytes, "largest request or reply payload")
      ->capture_default_str();
  app.add_option("--send-threads", sendThreads,
                 "helper threads writing large reply bursts (-1: one per extra core, at most 3)")
      ->capture_default_str();

  CLI::App* client = app.add_subcommand("client", "run one store operation and print the result");
  client->fallthrough();  // --token, --log-level after "client"
  std::string url;
  std::vector<std::string> args;
  int64_t timeoutMs = -1;
  bool noWait = false;
  client->add_option("--store", url, "tcp://HOST:PORT, etcd://HOST:PORT[,HOST:PORT] or memory")
      ->required();
  client->add_option("--timeout-ms", timeoutMs,
                     "timeout of the call (default: NCCL_RESILIENT_STORE_TIMEOUT_MS)");
  client->add_flag("--no-wait", noWait, "barrier: count the rank and return (mark a dead rank)");
  client->add_option("operation", args,
                     "set KEY VALUE | get KEY | add KEY DELTA | remove KEY | wait KEY... | "
                     "barrier NAME GENERATION RANK WORLD | ping");
  CLI11_PARSE(app, argc, argv);

  config::Params::global();  // applies the logging knobs
  applyLogLevel(logLevel);
  if (!tokenFile.empty()) {
    token = readTokenFile(tokenFile);
  } else if (token.empty()) {
    token = config::Params::global().get<config::kJobToken>();
  }
  if (client->parsed()) {
    ClientOptions options = ClientOptions::fromParams();
    options.token = token;
    return runClient(url, options, args, timeoutMs, noWait);
  }
  return serve(listen, {.token = token,
                        .maxFrameBytes = maxFrameBytes,
                        .maxConnections = maxConnections,
                        .sendThreads = sendThreads});
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const CLI::Error& e) {
    std::fprintf(stderr, "resilient-store: %s\n", e.what());
    return 2;
  } catch (const StoreError& e) {
    std::fprintf(stderr, "resilient-store: %s: %s\n", storeErrcName(e.code()), e.what());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resilient-store: %s\n", e.what());
    return 1;
  }
}
