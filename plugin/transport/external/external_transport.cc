#include "plugin/transport/external/external_transport.h"

#include <dlfcn.h>

#include <string>
#include <utility>

#include "common/log.h"
#include "plugin/transport/external/shim.h"

namespace resilient::transport::external {

LibraryHandle::~LibraryHandle() {
  if (handle_ != nullptr) {
    dlclose(handle_);
  }
}

LibraryHandle& LibraryHandle::operator=(LibraryHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) {
      dlclose(handle_);
    }
    handle_ = other.release();
  }
  return *this;
}

Status pluginStatus(ncclResult_t result, const std::string& plugin, int version, const char* call) {
  if (result == ncclSuccess || result == ncclInProgress) {
    return Status();
  }
  ErrorKind kind = ErrorKind::kInternal;
  switch (result) {
    case ncclSystemError: kind = ErrorKind::kSystem; break;
    case ncclRemoteError: kind = ErrorKind::kRemote; break;
    case ncclInvalidUsage:
    case ncclInvalidArgument: kind = ErrorKind::kInvalidUsage; break;
    default: break;
  }
  std::string message = "external net plugin " + plugin + " (ncclNetPlugin_v" +
                        std::to_string(version) + "): " + call + " returned " +
                        ncclResultName(result) + " (" + std::to_string(static_cast<int>(result)) +
                        ")";
  return Status::error(kind, std::move(message));
}

const char* displayName(const char* name) noexcept {
  return name != nullptr && name[0] != '\0' ? name : "(unnamed)";
}

Status requireMembers(const std::string& plugin, int version, const std::vector<Member>& members) {
  std::string missing;
  for (const Member& m : members) {
    if (!m.present) {
      missing += missing.empty() ? "" : ", ";
      missing += m.name;
    }
  }
  if (missing.empty()) {
    return Status();
  }
  return invalidUsage("external net plugin " + plugin + " (ncclNetPlugin_v" +
                      std::to_string(version) + ") leaves required members NULL: " + missing);
}

ExternalTransport::ExternalTransport(PluginBinding binding, const char* pluginName)
    : binding_(std::move(binding)), name_(displayName(pluginName)) {}

ExternalTransport::~ExternalTransport() {
  const int live = liveContexts();
  if (live > 0) {
    RES_WARN(NCCL_NET, "external net plugin %s unloaded with %d context(s) not finalized",
             name_.c_str(), live);
  }
}

int ExternalTransport::liveContexts() const noexcept {
  return liveContexts_.load(std::memory_order_relaxed);
}

void ExternalTransport::contextCreated() noexcept {
  liveContexts_.fetch_add(1, std::memory_order_relaxed);
}

void ExternalTransport::contextFinalized() noexcept {
  liveContexts_.fetch_sub(1, std::memory_order_relaxed);
}

Status ExternalTransport::failure(ncclResult_t result, const char* call) const {
  return pluginStatus(result, name_, binding_.version, call);
}

Status ExternalTransport::refuse(const char* call, const std::string& why) const {
  return invalidUsage("external net plugin " + name_ + " (ncclNetPlugin_v" +
                      std::to_string(binding_.version) + "): " + call + ": " + why);
}

const char* ExternalTransport::keep(const char* text) {
  if (text == nullptr) {
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(mutex_);
  return strings_.emplace(text).first->c_str();
}

}  // namespace resilient::transport::external
