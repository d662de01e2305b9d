#include "blackbox/writer.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "blackbox/region_file.h"
#include "blackbox/seqlock.h"
#include "common/params.h"

namespace resilient::blackbox {
namespace {

uint64_t clockNs(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// Holds an exclusive flock on an open region file while the header is
// examined or changed, so that two libraries of one process attaching or
// detaching at once see each other's counts.
class FileLock {
 public:
  explicit FileLock(int fd) : fd_(fd) {
    while (flock(fd_, LOCK_EX) != 0 && errno == EINTR) {
    }
  }
  ~FileLock() { flock(fd_, LOCK_UN); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

// True when `h` is a complete, current-version region of this very process
// (not a file left by an earlier process that had the same pid).
bool isOurLiveRegion(const resilient_blackbox_header* h, size_t fileSize, uint64_t startTicks) {
  return fileSize >= sizeof(resilient_blackbox_header) && h->magic == RESILIENT_BLACKBOX_MAGIC &&
         h->version == RESILIENT_BLACKBOX_VERSION && h->size == fileSize &&
         h->pid == static_cast<uint32_t>(getpid()) && h->processStartTicks == startTicks &&
         h->attachCount > 0;
}

void initHeader(resilient_blackbox_header* h, size_t size, const Layout& layout,
                const std::string& host, uint64_t startTicks) {
  h->version = RESILIENT_BLACKBOX_VERSION;
  h->size = size;
  h->pid = static_cast<uint32_t>(getpid());
  h->connectionSlots = RESILIENT_BLACKBOX_CONNECTIONS;
  h->faultSlots = RESILIENT_BLACKBOX_FAULTS;
  copyText(h->host, host);
  h->startWallNs = clockNs(CLOCK_REALTIME);
  h->connectionOffset = sizeof(resilient_blackbox_header);
  h->faultOffset =
      h->connectionOffset + RESILIENT_BLACKBOX_CONNECTIONS * sizeof(resilient_blackbox_connection);
  h->processStartTicks = startTicks;
  h->attachCount = 1;
  h->commSlots = RESILIENT_BLACKBOX_COMMS;
  h->flightOps = layout.flightOps;
  h->commOffset = h->faultOffset + RESILIENT_BLACKBOX_FAULTS * sizeof(resilient_blackbox_fault);
  h->flightOffset = h->commOffset + RESILIENT_BLACKBOX_COMMS * sizeof(resilient_blackbox_comm);
  // The magic last: a reader that sees it sees a complete header.
  std::atomic_ref<uint32_t>(h->magic).store(RESILIENT_BLACKBOX_MAGIC, std::memory_order_release);
}

}  // namespace

std::string regionPath(const std::string& dir, uint32_t pid) {
  return dir + "/" + RESILIENT_BLACKBOX_FILE_PREFIX + std::to_string(pid);
}

uint64_t processStartTicks(uint32_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  FILE* f = std::fopen(path.c_str(), "re");
  if (f == nullptr) {
    return 0;
  }
  char buf[1024];
  const size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // "pid (comm) state ppid ...": comm may contain spaces and parentheses,
  // so fields are counted from the last ')'; starttime is field 22.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) {
    return 0;
  }
  int field = 2;
  for (; *p != '\0' && field < 22; ++p) {
    if (*p == ' ') {
      ++field;
    }
  }
  return field == 22 ? std::strtoull(p, nullptr, 10) : 0;
}

Layout Layout::fromParams() {
  Layout l;
  l.flightOps = static_cast<uint32_t>(config::Params::global().get<config::kFlightRecorderOps>());
  return l;
}

Result<std::unique_ptr<Writer>> Writer::create(const std::string& dir, const std::string& host) {
  return create(dir, host, Layout::fromParams());
}

Result<std::unique_ptr<Writer>> Writer::create(const std::string& dir, const std::string& host,
                                               const Layout& requested) {
  Layout layout = requested;
  if (layout.flightOps == 0 || layout.flightOps > RESILIENT_BLACKBOX_FLIGHT_OPS_MAX) {
    return invalidUsage("blackbox: flight-recorder length " + std::to_string(layout.flightOps) +
                        " is outside [1, " + std::to_string(RESILIENT_BLACKBOX_FLIGHT_OPS_MAX) +
                        "]");
  }
  const std::string path = regionPath(dir, static_cast<uint32_t>(getpid()));
  const uint64_t startTicks = processStartTicks(static_cast<uint32_t>(getpid()));
  // A few rounds: a stale file is removed and the name created afresh; a
  // name replaced between our open and our lock is looked at again.
  for (int attempt = 0; attempt < 4; ++attempt) {
    bool created = false;
    Result<FileDescriptor> opened = createOrOpenOwnRegion(path, &created);
    if (!opened.ok()) {
      return opened.status();
    }
    FileDescriptor fd = std::move(*opened);
    void* base = MAP_FAILED;
    size_t size = 0;
    struct stat st {};
    {
      // Released before the descriptor is closed: the mapping keeps the
      // open file description (and so a flock) alive after close().
      FileLock lock(fd.get());
      if (!stillNamed(path, fd.get())) {
        continue;  // another writer of this process replaced it meanwhile
      }
      if (fstat(fd.get(), &st) != 0) {
        return systemError("blackbox: cannot stat " + path);
      }
      if (!created) {
        // Attach to this process's region when another library created it;
        // anything else at our name is stale (an earlier process with our
        // pid, a crash): removed, and created afresh (never truncated in place).
        if (static_cast<size_t>(st.st_size) >= sizeof(resilient_blackbox_header)) {
          size = static_cast<size_t>(st.st_size);
          base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
          if (base != MAP_FAILED) {
            auto* h = static_cast<resilient_blackbox_header*>(base);
            if (isOurLiveRegion(h, size, startTicks)) {
              std::atomic_ref<uint32_t>(h->attachCount).fetch_add(1, std::memory_order_relaxed);
              return std::unique_ptr<Writer>(new Writer(path, base, size, st));
            }
            munmap(base, size);
          }
        }
        ::unlink(path.c_str());
        continue;
      }
      size = RESILIENT_BLACKBOX_SIZE_FOR(layout.flightOps);
      if (ftruncate(fd.get(), static_cast<off_t>(size)) != 0) {
        Status s = systemError("blackbox: cannot size " + path);
        ::unlink(path.c_str());
        return s;
      }
      base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
      if (base == MAP_FAILED) {
        Status s = systemError("blackbox: cannot map " + path);
        ::unlink(path.c_str());
        return s;
      }
      initHeader(static_cast<resilient_blackbox_header*>(base), size, layout, host, startTicks);
    }
    return std::unique_ptr<Writer>(new Writer(path, base, size, st));
  }
  return systemError("blackbox: " + path + " keeps being replaced while we open it");
}

Writer::Writer(std::string path, void* base, size_t size, const struct stat& file)
    : path_(std::move(path)),
      device_(file.st_dev),
      inode_(file.st_ino),
      base_(base),
      size_(size),
      header_(static_cast<resilient_blackbox_header*>(base)),
      connections_(reinterpret_cast<resilient_blackbox_connection*>(static_cast<char*>(base) +
                                                                    header_->connectionOffset)),
      faults_(reinterpret_cast<resilient_blackbox_fault*>(static_cast<char*>(base) +
                                                          header_->faultOffset)),
      comms_(reinterpret_cast<resilient_blackbox_comm*>(static_cast<char*>(base) +
                                                        header_->commOffset)),
      flight_(reinterpret_cast<resilient_blackbox_op*>(static_cast<char*>(base) +
                                                       header_->flightOffset)),
      used_(new bool[RESILIENT_BLACKBOX_CONNECTIONS]()) {}

Writer::~Writer() {
  // Detach under the file lock; the last one out removes the file -- if the
  // name still is our region (it could have been replaced by someone else).
  const int fd = ::open(path_.c_str(), O_RDWR | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  struct stat st {};
  const bool ours = fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == device_ && st.st_ino == inode_;
  if (ours) {
    FileLock lock(fd);
    const uint32_t left =
        std::atomic_ref<uint32_t>(header_->attachCount).fetch_sub(1, std::memory_order_relaxed) - 1;
    if (left == 0 && stillNamed(path_, fd)) {
      ::unlink(path_.c_str());
    }
  } else {
    std::atomic_ref<uint32_t>(header_->attachCount).fetch_sub(1, std::memory_order_relaxed);
  }
  munmap(base_, size_);
  if (fd >= 0) {
    ::close(fd);
  }
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

void appendFaultRecord(resilient_blackbox_header& header, resilient_blackbox_fault* ring,
                       resilient_blackbox_fault record) noexcept {
  const uint64_t number =
      std::atomic_ref<uint64_t>(header.faultCount).fetch_add(1, std::memory_order_relaxed) + 1;
  record.number = number;
  record.wallNs = clockNs(CLOCK_REALTIME);
  record.monoNs = clockNs(CLOCK_MONOTONIC);
  seqWrite(&ring[(number - 1) % header.faultSlots], record);
}

void Writer::recordFault(resilient_blackbox_fault record) noexcept {
  appendFaultRecord(*header_, faults_, record);
}

int Writer::claimComm() noexcept {
  const uint32_t slots = header_->commSlots;
  for (uint32_t i = 0; i < slots; ++i) {
    uint32_t expected = RESILIENT_BLACKBOX_COMM_FREE;
    if (std::atomic_ref<uint32_t>(comms_[i].state)
            .compare_exchange_strong(expected, RESILIENT_BLACKBOX_COMM_ACTIVE,
                                     std::memory_order_relaxed)) {
      return static_cast<int>(i);
    }
  }
  // Reuse the finalized slot written longest ago.
  for (int attempt = 0; attempt < 4; ++attempt) {
    int oldest = -1;
    uint64_t oldestNs = UINT64_MAX;
    for (uint32_t i = 0; i < slots; ++i) {
      if (std::atomic_ref<uint32_t>(comms_[i].state).load(std::memory_order_relaxed) ==
          RESILIENT_BLACKBOX_COMM_FINALIZED) {
        const uint64_t t =
            std::atomic_ref<uint64_t>(comms_[i].updatedMonoNs).load(std::memory_order_relaxed);
        if (t < oldestNs) {
          oldestNs = t;
          oldest = static_cast<int>(i);
        }
      }
    }
    if (oldest < 0) {
      return -1;
    }
    uint32_t expected = RESILIENT_BLACKBOX_COMM_FINALIZED;
    if (std::atomic_ref<uint32_t>(comms_[oldest].state)
            .compare_exchange_strong(expected, RESILIENT_BLACKBOX_COMM_ACTIVE,
                                     std::memory_order_relaxed)) {
      return oldest;
    }
  }
  return -1;
}

void Writer::writeComm(int slot, const resilient_blackbox_comm& comm) noexcept {
  if (slot >= 0 && static_cast<uint32_t>(slot) < header_->commSlots) {
    seqWrite(&comms_[slot], comm);
  }
}

void Writer::writeFlight(int slot, uint64_t index, const resilient_blackbox_op& op) noexcept {
  if (slot >= 0 && static_cast<uint32_t>(slot) < header_->commSlots) {
    const uint64_t ring = header_->flightOps;
    seqWrite(&flight_[static_cast<uint64_t>(slot) * ring + index % ring], op);
  }
}

void Writer::heartbeat(uint64_t monoNs, uint64_t wallNs) noexcept {
  std::atomic_ref<uint64_t>(header_->heartbeatMonoNs).store(monoNs, std::memory_order_relaxed);
  std::atomic_ref<uint64_t>(header_->heartbeatWallNs).store(wallNs, std::memory_order_relaxed);
}

}  // namespace resilient::blackbox
