#include "tests/unit/store/etcd_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "store/etcd/http_client.h"

namespace resilient::test {
namespace {

// The lower end of the kernel's ephemeral port range (outbound connections
// take their local ports from it), or 32768 when it cannot be read.
int ephemeralLow() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return in >> low && low > 2048 ? low : 32768;
}

// True when 127.0.0.1:port can be bound now, as etcd binds it (SO_REUSEADDR).
bool bindable(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return false;
  }
  const int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// `n` distinct ports that are free now, drawn at random below the ephemeral
// range: a port from that range can be taken between this check and etcd's
// bind by the local end of any outbound connection, etcd's own included.
std::vector<uint16_t> freePorts(size_t n) {
  const int high = ephemeralLow();
  const int low = std::max(1024, high - 16384);
  std::mt19937 rng(std::random_device{}());
  std::uniform_int_distribution<int> pick(low, high - 1);
  std::vector<uint16_t> ports;
  for (int tries = 0; ports.size() < n && tries < 10000; ++tries) {
    const auto port = static_cast<uint16_t>(pick(rng));
    if (std::find(ports.begin(), ports.end(), port) == ports.end() && bindable(port)) {
      ports.push_back(port);
    }
  }
  if (ports.size() < n) {
    throw std::runtime_error("no free ports in [" + std::to_string(low) + ", " +
                             std::to_string(high) + ")");
  }
  return ports;
}

// The last lines of a member's log, for an error message.
std::string logTail(const std::string& path) {
  std::ifstream in(path);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  constexpr size_t kTail = 800;
  return all.size() > kTail ? "..." + all.substr(all.size() - kTail) : all;
}

std::string httpUrl(uint16_t port) {
  return "http://127.0.0.1:" + std::to_string(port);
}

}  // namespace

std::string etcdBinary() {
  if (const char* bin = std::getenv("RESILIENT_ETCD_BIN")) {  // NOLINT(concurrency-mt-unsafe)
    return ::access(bin, X_OK) == 0 ? bin : "";
  }
  const char* path = std::getenv("PATH");  // NOLINT(concurrency-mt-unsafe)
  std::string dirs = path != nullptr ? path : "/usr/bin:/bin";
  size_t pos = 0;
  while (pos <= dirs.size()) {
    const size_t colon = std::min(dirs.find(':', pos), dirs.size());
    std::string candidate = dirs.substr(pos, colon - pos) + "/etcd";
    if (::access(candidate.c_str(), X_OK) == 0) {
      return candidate;
    }
    pos = colon + 1;
  }
  return "";
}

EtcdCluster::EtcdCluster(int members) {
  const std::string bin = etcdBinary();
  if (bin.empty()) {
    throw std::runtime_error("etcd is not installed");
  }
  const std::filesystem::path base =
      std::filesystem::exists("/dev/shm") ? "/dev/shm" : std::filesystem::temp_directory_path();
  std::string pattern = (base / "resilient-etcd-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) {
    throw std::runtime_error("mkdtemp failed");
  }
  dir_ = pattern;
  // A member that exits while starting (a port taken by another process in
  // between) restarts the whole cluster on fresh ports: the ports are part of
  // every member's initial configuration.
  constexpr int kAttempts = 3;
  std::string error;
  for (int attempt = 1; attempt <= kAttempts; ++attempt) {
    error = start(bin, members, attempt);
    if (error.empty()) {
      return;
    }
    stop();
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
  throw std::runtime_error("etcd cluster of " + std::to_string(members) + " did not start in " +
                           std::to_string(kAttempts) + " attempts; last: " + error);
}

std::string EtcdCluster::start(const std::string& bin, int members, int attempt) {
  members_.clear();
  members_.resize(static_cast<size_t>(members));
  const std::vector<uint16_t> ports = freePorts(2 * static_cast<size_t>(members));
  std::string initial;
  for (size_t i = 0; i < members_.size(); ++i) {
    Member& m = members_[i];
    m.name = "m" + std::to_string(i);
    m.clientPort = ports[2 * i];
    m.peerPort = ports[2 * i + 1];
    m.dataDir = dir_ + "/" + std::to_string(attempt) + "-" + m.name;
    initial += (i ? "," : "") + m.name + "=" + httpUrl(m.peerPort);
  }
  const std::string clusterToken = "test-" + std::to_string(::getpid()) + "-" +
                                   dir_.substr(dir_.size() - 6) + "-" + std::to_string(attempt);
  for (Member& m : members_) {
    // Short heartbeat and election timeouts: a lost leader is replaced in
    // about a second. Output goes to a log file beside the data.
    const std::string cmd =
        "exec '" + bin + "' --name " + m.name + " --data-dir '" + m.dataDir + "'" +
        " --listen-client-urls " + httpUrl(m.clientPort) + " --advertise-client-urls " +
        httpUrl(m.clientPort) + " --listen-peer-urls " + httpUrl(m.peerPort) +
        " --initial-advertise-peer-urls " + httpUrl(m.peerPort) + " --initial-cluster " + initial +
        " --initial-cluster-state new --initial-cluster-token " + clusterToken +
        " --heartbeat-interval 50 --election-timeout 500 --log-level error" + " > '" + m.dataDir +
        ".log' 2>&1";
    m.process = std::make_unique<ChildProcess>(std::vector<std::string>{"/bin/sh", "-c", cmd});
  }
  for (int i = 0; i < members; ++i) {
    std::string error = waitHealthy(i);
    if (!error.empty()) {
      return error;
    }
  }
  return "";
}

void EtcdCluster::stop() {
  for (auto& m : members_) {
    m.process.reset();  // SIGKILL and reap
  }
}

EtcdCluster::~EtcdCluster() {
  stop();
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
}

std::vector<std::string> EtcdCluster::endpoints() const {
  std::vector<std::string> out;
  for (const auto& m : members_) {
    out.push_back("127.0.0.1:" + std::to_string(m.clientPort));
  }
  return out;
}

std::string EtcdCluster::url() const {
  std::string s = "etcd://";
  for (const auto& e : endpoints()) {
    s += (s.size() > 7 ? "," : "") + e;
  }
  return s;
}

void EtcdCluster::kill(int member) {
  Member& m = members_.at(static_cast<size_t>(member));
  m.process->kill(SIGKILL);
  m.process->wait(std::chrono::milliseconds(10000));
}

std::string EtcdCluster::waitHealthy(int member) {
  store::etcd::HttpClient http;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  Member& m = members_[static_cast<size_t>(member)];
  const std::string ep = "127.0.0.1:" + std::to_string(m.clientPort);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    // A linearizable read succeeds once the member is in a cluster with a leader.
    store::etcd::HttpResult r =
        http.post(ep, "/v3/kv/range", R"({"key":"AA=="})", std::chrono::milliseconds(1000));
    if (r.transport == store::etcd::HttpResult::Transport::kOk && r.status == 200) {
      return "";
    }
    last = r.error.empty() ? r.body : r.error;
    const int status = m.process->wait(std::chrono::milliseconds(0));
    if (status >= 0) {
      return "etcd member " + std::to_string(member) + " exited with status " +
             std::to_string(status) + " while starting (client port " +
             std::to_string(m.clientPort) + ", peer port " + std::to_string(m.peerPort) +
             "); its log: " + logTail(m.dataDir + ".log");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // waiting for a process to start
  }
  return "etcd member " + std::to_string(member) + " not healthy after 30 s: " + last +
         "; its log: " + logTail(m.dataDir + ".log");
}

int EtcdCluster::leader() const {
  store::etcd::HttpClient http;
  for (size_t i = 0; i < members_.size(); ++i) {
    const std::string ep = "127.0.0.1:" + std::to_string(members_[i].clientPort);
    store::etcd::HttpResult r =
        http.post(ep, "/v3/maintenance/status", "{}", std::chrono::milliseconds(1000));
    if (r.transport != store::etcd::HttpResult::Transport::kOk || r.status != 200) {
      continue;
    }
    const nlohmann::json j = nlohmann::json::parse(r.body, nullptr, false);
    if (j.is_discarded()) {
      continue;
    }
    const std::string self = j["header"].value("member_id", std::string());
    const std::string leader = j.value("leader", std::string());
    if (!self.empty() && self == leader) {
      return static_cast<int>(i);
    }
  }
  return -1;
}

}  // namespace resilient::test
