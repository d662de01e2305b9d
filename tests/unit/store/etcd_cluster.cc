#include "tests/unit/store/etcd_cluster.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include <nlohmann/json.hpp>

#include "restart/store/etcd/http_client.h"

namespace resilient::test {
namespace {

uint16_t freePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("no free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
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
  members_.resize(static_cast<size_t>(members));
  std::string initial;
  for (int i = 0; i < members; ++i) {
    Member& m = members_[static_cast<size_t>(i)];
    m.name = "m" + std::to_string(i);
    m.clientPort = freePort();
    m.peerPort = freePort();
    initial += (i ? "," : "") + m.name + "=" + httpUrl(m.peerPort);
  }
  const std::string clusterToken =
      "test-" + std::to_string(::getpid()) + "-" + dir_.substr(dir_.size() - 6);
  for (int i = 0; i < members; ++i) {
    Member& m = members_[static_cast<size_t>(i)];
    const std::string data = dir_ + "/" + m.name;
    // Short heartbeat and election timeouts: a lost leader is replaced in
    // about a second. Output goes to a log file beside the data.
    const std::string cmd =
        "exec '" + bin + "' --name " + m.name + " --data-dir '" + data + "'" +
        " --listen-client-urls " + httpUrl(m.clientPort) + " --advertise-client-urls " +
        httpUrl(m.clientPort) + " --listen-peer-urls " + httpUrl(m.peerPort) +
        " --initial-advertise-peer-urls " + httpUrl(m.peerPort) + " --initial-cluster " + initial +
        " --initial-cluster-state new --initial-cluster-token " + clusterToken +
        " --heartbeat-interval 50 --election-timeout 500 --log-level error" + " > '" + data +
        ".log' 2>&1";
    m.process = std::make_unique<ChildProcess>(std::vector<std::string>{"/bin/sh", "-c", cmd});
  }
  for (int i = 0; i < members; ++i) {
    waitHealthy(i);
  }
}

EtcdCluster::~EtcdCluster() {
  for (auto& m : members_) {
    m.process.reset();  // SIGKILL and reap
  }
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

void EtcdCluster::waitHealthy(int member) const {
  store::etcd::HttpClient http;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  const std::string ep =
      "127.0.0.1:" + std::to_string(members_[static_cast<size_t>(member)].clientPort);
  std::string last;
  while (std::chrono::steady_clock::now() < deadline) {
    // A linearizable read succeeds once the member is in a cluster with a leader.
    store::etcd::HttpResult r =
        http.post(ep, "/v3/kv/range", R"({"key":"AA=="})", std::chrono::milliseconds(1000));
    if (r.transport == store::etcd::HttpResult::Transport::kOk && r.status == 200) {
      return;
    }
    last = r.error.empty() ? r.body : r.error;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));  // waiting for a process to start
  }
  throw std::runtime_error("etcd member " + std::to_string(member) + " not healthy: " + last);
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
