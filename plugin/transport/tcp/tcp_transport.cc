#include "plugin/transport/tcp/tcp_transport.h"

#include <sys/random.h>
#include <unistd.h>

#include <climits>

#include "common/clock.h"
#include "plugin/transport/tcp/comm.h"
#include "plugin/transport/tcp/connector.h"
#include "plugin/transport/tcp/handle_address.h"
#include "plugin/transport/tcp/listener.h"
#include "plugin/transport/tcp/wire.h"

namespace resilient::transport::tcp {
namespace {

std::string hostName() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) {
    return "?";
  }
  return buf;
}

// A connection nonce: random, else a mix of clock, pid and a counter.
uint64_t randomNonce() noexcept {
  uint64_t v = 0;
  if (getrandom(&v, sizeof v, GRND_NONBLOCK) == static_cast<ssize_t>(sizeof v) && v != 0) {
    return v;
  }
  static std::atomic<uint64_t> counter{0};
  v = monotonicNs() ^ (static_cast<uint64_t>(getpid()) << 40) ^
      (counter.fetch_add(1, std::memory_order_relaxed) * 0x9e3779b97f4a7c15ull);
  return v == 0 ? 1 : v;
}

}  // namespace

TcpTransport::TcpTransport(const TcpOptions& options)
    : options_(clampOptions(options)), hostname_(hostName()) {}

TcpTransport::~TcpTransport() = default;

Status TcpTransport::initContext(uint64_t commId, const CommConfig& config,
                                 std::unique_ptr<Context>* ctx) {
  (void)commId;
  (void)config;
  ctx->reset();
  return {};
}

Status TcpTransport::ensureDevices() {
  if (devicesLoaded_.load(std::memory_order_acquire)) {
    return devicesStatus_;
  }
  std::lock_guard<std::mutex> lock(devicesMutex_);
  if (!devicesLoaded_.load(std::memory_order_relaxed)) {
    devicesStatus_ = findDevices(options_, &devices_);
    if (devicesStatus_.ok()) {
      for (size_t i = 0; i < devices_.size(); ++i) {
        RES_INFO(NCCL_NET | NCCL_INIT, "tcp: device %zu: %s %s, %d Mbps%s%s", i,
                 devices_[i].name.c_str(), devices_[i].address.hostText().c_str(),
                 devices_[i].speedMbps, devices_[i].pciPath.empty() ? "" : ", ",
                 devices_[i].pciPath.c_str());
      }
    }
    devicesLoaded_.store(true, std::memory_order_release);
  }
  return devicesStatus_;
}

Status TcpTransport::checkDevice(int dev) {
  RESILIENT_TRY(ensureDevices());
  if (dev < 0 || static_cast<size_t>(dev) >= devices_.size()) {
    return invalidUsage("tcp: device " + std::to_string(dev) + " out of range (" +
                        std::to_string(devices_.size()) + " devices)");
  }
  return {};
}

Status TcpTransport::devices(int* ndev) {
  *ndev = 0;
  RESILIENT_TRY(ensureDevices());
  *ndev = static_cast<int>(devices_.size());
  return {};
}

Status TcpTransport::properties(int dev, Properties* props) {
  RESILIENT_TRY(checkDevice(dev));
  const Device& d = devices_[static_cast<size_t>(dev)];
  *props = Properties{};
  props->name = d.name.c_str();
  props->pciPath = d.pciPath.empty() ? nullptr : d.pciPath.c_str();
  props->guid = static_cast<uint64_t>(dev);
  props->ptrSupport = kPtrHost;
  props->regIsGlobal = 0;
  props->forceFlush = 0;
  props->speedMbps = d.speedMbps;
  props->port = 0;
  props->latencyUs = 0;
  props->maxComms = 65536;
  props->maxRecvs = kMaxRecvs;
  props->maxP2pBytes = kMaxMessageBytes;
  props->maxCollBytes = kMaxMessageBytes;
  return {};
}

size_t TcpTransport::handleBytes() const noexcept {
  return kHandleBytes;
}

Status TcpTransport::listen(Context* ctx, int dev, std::byte* handle,
                            std::unique_ptr<Listener>* listener) {
  (void)ctx;
  listener->reset();
  RESILIENT_TRY(checkDevice(dev));
  std::unique_ptr<TcpListener> comm;
  RESILIENT_TRY(TcpListener::create(devices_[static_cast<size_t>(dev)].address, options_,
                                    &listenWarnLimiters_, &comm));
  encodeHandle(toListenHandle(comm->address()), handle);
  RES_INFO(NCCL_NET | NCCL_INIT, "tcp: listening on %s (%s)", comm->address().toString().c_str(),
           devices_[static_cast<size_t>(dev)].name.c_str());
  *listener = std::move(comm);
  return {};
}

Status TcpTransport::connect(Context* ctx, int dev, std::byte* handle,
                             DeviceHandleRequest /*wantDeviceHandle*/,
                             std::unique_ptr<SendComm>* comm) {
  (void)ctx;
  comm->reset();
  RESILIENT_TRY(checkDevice(dev));
  Connector* connector = nullptr;
  {
    std::lock_guard<std::mutex> lock(connectingMutex_);
    auto it = connecting_.find(handle);
    if (it != connecting_.end() && !it->second->sameHandle(handle)) {
      connecting_.erase(it);  // the caller reused the buffer for another connection
      it = connecting_.end();
    }
    if (it == connecting_.end()) {
      ListenHandle decoded;
      RESILIENT_TRY(decodeHandle(handle, &decoded));
      it = connecting_
               .emplace(handle, std::make_unique<Connector>(decoded, handle, options_, hostname_,
                                                            randomNonce()))
               .first;
    }
    connector = it->second.get();
  }
  Status status = connector->poll(comm);
  if (!status.ok() || *comm != nullptr) {
    std::lock_guard<std::mutex> lock(connectingMutex_);
    connecting_.erase(handle);
  }
  return status;
}

}  // namespace resilient::transport::tcp
