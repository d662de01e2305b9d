#include "plugin/blackbox/writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <cstring>

#include "plugin/blackbox/seqlock.h"

namespace resilient::blackbox {
namespace {

uint64_t clockNs(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

}  // namespace

std::string regionPath(const std::string& dir, uint32_t pid) {
  return dir + "/" + RESILIENT_BLACKBOX_FILE_PREFIX + std::to_string(pid);
}

Result<std::unique_ptr<Writer>> Writer::create(const std::string& dir, const std::string& host) {
  const std::string path = regionPath(dir, static_cast<uint32_t>(getpid()));
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return systemError("blackbox: cannot create " + path);
  }
  if (ftruncate(fd, static_cast<off_t>(RESILIENT_BLACKBOX_SIZE)) != 0) {
    Status s = systemError("blackbox: cannot size " + path);
    ::close(fd);
    ::unlink(path.c_str());
    return s;
  }
  void* base = mmap(nullptr, RESILIENT_BLACKBOX_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ::close(fd);
  if (base == MAP_FAILED) {
    Status s = systemError("blackbox: cannot map " + path);
    ::unlink(path.c_str());
    return s;
  }
  auto* h = static_cast<resilient_blackbox_header*>(base);
  h->version = RESILIENT_BLACKBOX_VERSION;
  h->size = RESILIENT_BLACKBOX_SIZE;
  h->pid = static_cast<uint32_t>(getpid());
  h->connectionSlots = RESILIENT_BLACKBOX_CONNECTIONS;
  h->faultSlots = RESILIENT_BLACKBOX_FAULTS;
  copyText(h->host, host);
  h->startWallNs = clockNs(CLOCK_REALTIME);
  h->connectionOffset = sizeof(resilient_blackbox_header);
  h->faultOffset = sizeof(resilient_blackbox_header) +
                   RESILIENT_BLACKBOX_CONNECTIONS * sizeof(resilient_blackbox_connection);
  // The magic last: a reader that sees it sees a complete header.
  std::atomic_ref<uint32_t>(h->magic).store(RESILIENT_BLACKBOX_MAGIC, std::memory_order_release);
  return std::unique_ptr<Writer>(new Writer(path, base));
}

Writer::Writer(std::string path, void* base)
    : path_(std::move(path)),
      base_(base),
      header_(static_cast<resilient_blackbox_header*>(base)),
      connections_(reinterpret_cast<resilient_blackbox_connection*>(static_cast<char*>(base) +
                                                                    header_->connectionOffset)),
      faults_(reinterpret_cast<resilient_blackbox_fault*>(static_cast<char*>(base) +
                                                          header_->faultOffset)),
      used_(new bool[RESILIENT_BLACKBOX_CONNECTIONS]()) {}

Writer::~Writer() {
  munmap(base_, RESILIENT_BLACKBOX_SIZE);
  ::unlink(path_.c_str());
}

int Writer::claimConnection() noexcept {
  for (int i = 0; i < RESILIENT_BLACKBOX_CONNECTIONS; ++i) {
    if (!used_[static_cast<size_t>(i)]) {
      used_[static_cast<size_t>(i)] = true;
      return i;
    }
  }
  return -1;
}

void Writer::releaseConnection(int slot) noexcept {
  if (slot < 0 || slot >= RESILIENT_BLACKBOX_CONNECTIONS) {
    return;
  }
  resilient_blackbox_connection empty{};
  empty.state = RESILIENT_BLACKBOX_CONN_FREE;
  seqWrite(&connections_[slot], empty);
  used_[static_cast<size_t>(slot)] = false;
}

void Writer::writeConnection(int slot, const resilient_blackbox_connection& snapshot) noexcept {
  if (slot >= 0 && slot < RESILIENT_BLACKBOX_CONNECTIONS) {
    seqWrite(&connections_[slot], snapshot);
  }
}

void Writer::recordFault(resilient_blackbox_fault record) noexcept {
  const uint64_t number =
      std::atomic_ref<uint64_t>(header_->faultCount).fetch_add(1, std::memory_order_relaxed) + 1;
  record.number = number;
  record.wallNs = clockNs(CLOCK_REALTIME);
  record.monoNs = clockNs(CLOCK_MONOTONIC);
  seqWrite(&faults_[(number - 1) % RESILIENT_BLACKBOX_FAULTS], record);
}

void Writer::heartbeat(uint64_t monoNs, uint64_t wallNs) noexcept {
  std::atomic_ref<uint64_t>(header_->heartbeatMonoNs).store(monoNs, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(header_->heartbeatWallNs).store(wallNs, std::memory_order_relaxed);
}

}  // namespace resilient::blackbox
