#include "restart/protocol/status_page.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <new>
#include <stdexcept>
#include <string>
#include <system_error>

namespace resilient::restart::protocol {

namespace {

constexpr size_t kPageBytes = 4096;
static_assert(sizeof(StatusPage) <= kPageBytes);

StatusPage* mapPage(int fd) {
  void* p = ::mmap(nullptr, kPageBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    throw std::system_error(errno, std::generic_category(), "mmap of the monitor status page");
  }
  return static_cast<StatusPage*>(p);
}

}  // namespace

const char* rankPhaseName(RankPhase phase) noexcept {
  switch (phase) {
    case RankPhase::kStarting: return "starting";
    case RankPhase::kInitialBarrier: return "initial barrier";
    case RankPhase::kRunning: return "running";
    case RankPhase::kRestarting: return "restarting";
    case RankPhase::kIterationBarrier: return "iteration barrier";
    case RankPhase::kCompleting: return "completing";
    case RankPhase::kDone: return "done";
    case RankPhase::kFailed: return "failed";
    case RankPhase::kJoining: return "joining";
    case RankPhase::kWithdrawn: return "withdrawn";
  }
  return "unknown";
}

uint64_t StatusPage::lastProgressNs() const noexcept {
  return std::max(autoProgressNs.load(std::memory_order_acquire),
                  manualPingNs.load(std::memory_order_acquire));
}

StatusPageMapping StatusPageMapping::create(int initialRank) {
  FileDescriptor fd(::memfd_create("resilient-monitor-status", 0));  // inherited across exec
  if (!fd.valid()) {
    throw std::system_error(errno, std::generic_category(),
                            "memfd_create for the monitor status page");
  }
  if (::ftruncate(fd.get(), kPageBytes) != 0) {
    throw std::system_error(errno, std::generic_category(), "ftruncate of the monitor status page");
  }
  StatusPage* page = new (mapPage(fd.get())) StatusPage{};
  page->magic = kStatusPageMagic;
  page->version = kStatusPageVersion;
  page->rankPid.store(::getpid(), std::memory_order_relaxed);
  page->initialRank.store(initialRank, std::memory_order_relaxed);
  page->phase.store(static_cast<uint32_t>(RankPhase::kStarting), std::memory_order_release);
  return StatusPageMapping(std::move(fd), page);
}

StatusPageMapping StatusPageMapping::attach(int rawFd) {
  FileDescriptor fd(rawFd);
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    throw std::system_error(errno, std::generic_category(),
                            "the monitor status page descriptor " + std::to_string(rawFd));
  }
  if (static_cast<size_t>(st.st_size) < kPageBytes) {
    throw std::runtime_error("descriptor " + std::to_string(rawFd) +
                             " is not a monitor status page (" + std::to_string(st.st_size) +
                             " bytes)");
  }
  StatusPage* page = mapPage(fd.get());
  if (page->magic != kStatusPageMagic || page->version != kStatusPageVersion) {
    ::munmap(page, kPageBytes);
    throw std::runtime_error("descriptor " + std::to_string(rawFd) +
                             " holds no monitor status page of version " +
                             std::to_string(kStatusPageVersion));
  }
  return StatusPageMapping(std::move(fd), page);
}

StatusPageMapping::StatusPageMapping(StatusPageMapping&& other) noexcept
    : fd_(std::move(other.fd_)), page_(std::exchange(other.page_, nullptr)) {}

StatusPageMapping::~StatusPageMapping() {
  if (page_ != nullptr) {
    ::munmap(page_, kPageBytes);
  }
}

}  // namespace resilient::restart::protocol
