#include "blackbox/reader.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>

#include "blackbox/region_file.h"
#include "blackbox/seqlock.h"
#include "blackbox/writer.h"

namespace resilient::blackbox {
namespace {

// The control word's abort: a new epoch first, so that a plugin that sees
// the fail-fast bit sees the epoch of this abort too.
void beginAbortOn(uint32_t& word) noexcept {
  std::atomic_ref<uint32_t> control(word);
  control.fetch_add(RESILIENT_BLACKBOX_CONTROL_ABORT_EPOCH_ONE, std::memory_order_relaxed);
  control.fetch_or(RESILIENT_BLACKBOX_CONTROL_FAIL_FAST, std::memory_order_release);
}

void endAbortOn(uint32_t& word) noexcept {
  std::atomic_ref<uint32_t>(word).fetch_and(~RESILIENT_BLACKBOX_CONTROL_FAIL_FAST,
                                            std::memory_order_release);
}

// A mapping of a region file, unmapped on destruction.
class Mapping {
 public:
  static Result<Mapping> open(const std::string& path, bool writable) {
    // No link followed, no blocking on a FIFO planted at the name.
    Result<FileDescriptor> fd = openRegionFile(path, writable);
    if (!fd.ok()) {
      return fd.status();
    }
    struct stat st {};
    if (fstat(fd->get(), &st) != 0) {
      return systemError("cannot stat blackbox " + path);
    }
    const auto size = static_cast<size_t>(st.st_size);
    if (size < sizeof(resilient_blackbox_header)) {
      return invalidUsage(path + " is not a blackbox (" + std::to_string(size) + " bytes)");
    }
    void* base = mmap(nullptr, size, writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED,
                      fd->get(), 0);
    if (base == MAP_FAILED) {
      return systemError("cannot map blackbox " + path);
    }
    Mapping m(base, size);
    const auto* h = m.header();
    if (std::atomic_ref<uint32_t>(const_cast<uint32_t&>(h->magic))
            .load(std::memory_order_acquire) != RESILIENT_BLACKBOX_MAGIC) {
      return invalidUsage(path + " is not a blackbox (bad magic)");
    }
    if (h->version != RESILIENT_BLACKBOX_VERSION) {
      return invalidUsage(path + " has blackbox layout version " + std::to_string(h->version) +
                          "; this tool reads version " +
                          std::to_string(RESILIENT_BLACKBOX_VERSION));
    }
    const uint64_t connectionsEnd =
        h->connectionOffset + uint64_t{h->connectionSlots} * sizeof(resilient_blackbox_connection);
    const uint64_t faultsEnd =
        h->faultOffset + uint64_t{h->faultSlots} * sizeof(resilient_blackbox_fault);
    const uint64_t commsEnd =
        h->commOffset + uint64_t{h->commSlots} * sizeof(resilient_blackbox_comm);
    const uint64_t flightEnd =
        h->flightOffset + uint64_t{h->commSlots} * h->flightOps * sizeof(resilient_blackbox_op);
    if (h->size != size || h->commSlots > RESILIENT_BLACKBOX_COMMS ||
        h->flightOps > RESILIENT_BLACKBOX_FLIGHT_OPS_MAX ||
        h->connectionOffset < sizeof(resilient_blackbox_header) ||
        connectionsEnd > h->faultOffset || faultsEnd > h->commOffset ||
        commsEnd > h->flightOffset || flightEnd > size) {
      return invalidUsage(path + " is truncated or inconsistent");
    }
    return m;
  }
  Mapping(Mapping&& o) noexcept : base_(std::exchange(o.base_, nullptr)), size_(o.size_) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  Mapping& operator=(Mapping&&) = delete;
  ~Mapping() {
    if (base_ != nullptr) {
      munmap(base_, size_);
    }
  }
  resilient_blackbox_header* header() const {
    return static_cast<resilient_blackbox_header*>(base_);
  }
  template <class T>
  const T* at(uint64_t offset) const {
    return reinterpret_cast<const T*>(static_cast<const char*>(base_) + offset);
  }

 private:
  Mapping(void* base, size_t size) : base_(base), size_(size) {}
  void* base_;
  size_t size_;
};

}  // namespace

std::string resolveRegion(const std::string& pidOrPath, const std::string& dir) {
  const bool numeric =
      !pidOrPath.empty() &&
      std::all_of(pidOrPath.begin(), pidOrPath.end(), [](char c) { return c >= '0' && c <= '9'; });
  return numeric ? regionPath(dir, static_cast<uint32_t>(std::stoul(pidOrPath))) : pidOrPath;
}

namespace {

Snapshot snapshotOf(const Mapping& m, const std::string& path, const ReadOptions& options) {
  Snapshot snap;
  snap.path = path;
  // Word by word: writers in this process update counters while we read.
  snap.header.magic = std::atomic_ref<uint32_t>(m.header()->magic).load(std::memory_order_acquire);
  detail::loadPayload<resilient_blackbox_header>(&snap.header, m.header());
  // Alive: a process with that pid exists and is the one that wrote the
  // region (not a later process that got the same pid).
  snap.processAlive = (kill(static_cast<pid_t>(snap.header.pid), 0) == 0 || errno == EPERM) &&
                      (snap.header.processStartTicks == 0 ||
                       processStartTicks(snap.header.pid) == snap.header.processStartTicks);
  const auto* conns = m.at<resilient_blackbox_connection>(snap.header.connectionOffset);
  for (uint32_t i = 0; options.connections && i < snap.header.connectionSlots; ++i) {
    resilient_blackbox_connection c{};
    if (seqRead(&conns[i], &c) && c.state != RESILIENT_BLACKBOX_CONN_FREE) {
      snap.connections.push_back(c);
    }
  }
  const auto* faults = m.at<resilient_blackbox_fault>(snap.header.faultOffset);
  for (uint32_t i = 0; options.faults && i < snap.header.faultSlots; ++i) {
    resilient_blackbox_fault f{};
    if (seqRead(&faults[i], &f) && f.number != 0) {
      snap.faults.push_back(f);
    }
  }
  std::sort(snap.faults.begin(), snap.faults.end(),
            [](const auto& a, const auto& b) { return a.number < b.number; });
  const auto* comms = m.at<resilient_blackbox_comm>(snap.header.commOffset);
  const auto* flight = m.at<resilient_blackbox_op>(snap.header.flightOffset);
  for (uint32_t i = 0; i < snap.header.commSlots; ++i) {
    CommView view;
    if (!seqRead(&comms[i], &view.comm) || view.comm.state == RESILIENT_BLACKBOX_COMM_FREE) {
      continue;
    }
    const auto* ring = flight + uint64_t{i} * snap.header.flightOps;
    for (uint32_t k = 0; options.flight && k < snap.header.flightOps; ++k) {
      resilient_blackbox_op op{};
      // Entries of an earlier communicator that had the slot are skipped.
      if (seqRead(&ring[k], &op) && op.state != RESILIENT_BLACKBOX_OP_NONE &&
          op.commId == view.comm.commId) {
        view.flight.push_back(op);
      }
    }
    std::sort(view.flight.begin(), view.flight.end(),
              [](const auto& a, const auto& b) { return a.opIndex < b.opIndex; });
    snap.comms.push_back(std::move(view));
  }
  std::stable_sort(snap.comms.begin(), snap.comms.end(), [](const auto& a, const auto& b) {
    return a.comm.state == RESILIENT_BLACKBOX_COMM_ACTIVE &&
           b.comm.state != RESILIENT_BLACKBOX_COMM_ACTIVE;
  });
  return snap;
}

}  // namespace

Result<Snapshot> readRegion(const std::string& path, const ReadOptions& options) {
  auto mapping = Mapping::open(path, false);
  if (!mapping.ok()) {
    return mapping.status();
  }
  return snapshotOf(*mapping, path, options);
}

struct RegionWatch::Impl {
  Mapping mapping;
  std::string path;
};

Result<RegionWatch> RegionWatch::open(const std::string& path) {
  auto mapping = Mapping::open(path, true);
  if (!mapping.ok()) {
    return mapping.status();
  }
  RegionWatch w;
  w.impl_ = std::make_unique<Impl>(Impl{std::move(mapping).value(), path});
  return w;
}

RegionWatch::RegionWatch() = default;
RegionWatch::RegionWatch(RegionWatch&&) noexcept = default;
RegionWatch& RegionWatch::operator=(RegionWatch&&) noexcept = default;
RegionWatch::~RegionWatch() = default;

uint64_t RegionWatch::faultCount() const noexcept {
  return std::atomic_ref<uint64_t>(impl_->mapping.header()->faultCount)
      .load(std::memory_order_acquire);
}

std::vector<resilient_blackbox_fault> RegionWatch::faultsAfter(uint64_t seen) const {
  const resilient_blackbox_header* h = impl_->mapping.header();
  const uint64_t count = faultCount();
  const uint64_t slots = h->faultSlots;
  std::vector<resilient_blackbox_fault> out;
  if (slots == 0 || count <= seen) {
    return out;
  }
  const auto* ring = impl_->mapping.at<resilient_blackbox_fault>(h->faultOffset);
  for (uint64_t n = std::max(seen, count > slots ? count - slots : 0) + 1; n <= count; ++n) {
    resilient_blackbox_fault f{};
    if (seqRead(&ring[(n - 1) % slots], &f) && f.number == n) {
      out.push_back(f);
    }
  }
  return out;
}

Snapshot RegionWatch::read(const ReadOptions& options) const {
  return snapshotOf(impl_->mapping, impl_->path, options);
}

void RegionWatch::beginAbort() const noexcept {
  beginAbortOn(impl_->mapping.header()->control);
}

void RegionWatch::endAbort() const noexcept {
  endAbortOn(impl_->mapping.header()->control);
}

void RegionWatch::recordReport(const resilient_blackbox_fault& report) const noexcept {
  resilient_blackbox_header* h = impl_->mapping.header();
  auto* ring = const_cast<resilient_blackbox_fault*>(  // mapped writable
      impl_->mapping.at<resilient_blackbox_fault>(h->faultOffset));
  appendFaultRecord(*h, ring, report);
}

const std::string& RegionWatch::path() const noexcept {
  return impl_->path;
}

namespace {

// Runs `change` on the control word of the region at `path`.
Status changeControl(const std::string& path, void (*change)(uint32_t&) noexcept) {
  auto mapping = Mapping::open(path, true);
  if (!mapping.ok()) {
    return mapping.status();
  }
  change(mapping->header()->control);
  return {};
}

}  // namespace

Status beginAbort(const std::string& path) {
  return changeControl(path, &beginAbortOn);
}

Status endAbort(const std::string& path) {
  return changeControl(path, &endAbortOn);
}

Status recordReport(const std::string& path, const resilient_blackbox_fault& report) {
  auto watch = RegionWatch::open(path);
  if (!watch.ok()) {
    return watch.status();
  }
  watch->recordReport(report);
  return {};
}

}  // namespace resilient::blackbox
