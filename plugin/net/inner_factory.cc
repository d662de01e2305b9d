#include "plugin/net/inner_factory.h"

#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <vector>

#include "common/log.h"
#include "plugin/net/core.h"
#include "plugin/net/inner_log.h"
#include "plugin/net/not_wrapped.h"
#include "plugin/transport/external/loader.h"
#include "plugin/transport/fault/fault_transport.h"
#include "plugin/transport/fault/spec.h"
#include "plugin/transport/tcp/devices.h"
#include "plugin/transport/tcp/tcp_transport.h"

namespace resilient::net {
namespace {

int familyOf(config::SocketFamily choice) {
  switch (choice) {
    case config::SocketFamily::kInet: return AF_INET;
    case config::SocketFamily::kInet6: return AF_INET6;
    case config::SocketFamily::kAny: return 0;
  }
  return 0;
}

// Helper threads only pay when there are spare cores for them: with few, the
// hand-off and the context switches cost more than they bring (measured in
// docs/performance.md), and NCCL's proxy thread moves the bytes itself.
int automaticHelperThreads() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int cpus = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 1;
  return cpus <= 4 ? 0 : 2;
}

}  // namespace

transport::tcp::TcpOptions tcpOptionsFrom(const config::Params& params) {
  transport::tcp::TcpOptions o;
  o.ifname = params.get<config::kSocketIfname>();
  o.family = familyOf(params.get<config::kSocketFamily>());
  // The knob's range is the transport's: nothing is clamped without a word.
  static_assert(config::kSocketNsocks.spec().max == transport::tcp::kMaxDataSockets);
  o.nSocks = static_cast<int>(params.get<config::kSocketNsocks>());
  o.nThreads = static_cast<int>(params.get<config::kSocketNthreads>());
  if (o.nThreads < 0) {
    o.nThreads = automaticHelperThreads();
  }
  o.inlineBytes = static_cast<size_t>(params.get<config::kSocketInlineBytes>());
  o.chunkBytes = static_cast<uint32_t>(params.get<config::kSocketChunkBytes>());
  o.socketBufferBytes = static_cast<int>(params.get<config::kSocketBufferBytes>());
  o.connectTimeoutMs = static_cast<int>(params.get<config::kConnectTimeoutMs>());
  o.tcpUserTimeoutMs = static_cast<int>(params.get<config::kTcpUserTimeoutMs>());
  o.jobToken = params.get<config::kJobToken>();
  return transport::tcp::clampOptions(o);
}

namespace {

// The liveness channel listens on the first interface our TCP transport would
// use (same NCCL_RESILIENT_SOCKET_IFNAME), so that it shares the data's path
// when the inner transport is TCP. Without one, the layer runs without it.
SocketAddress livenessAddress(const transport::tcp::TcpOptions& tcp) {
  std::vector<transport::tcp::Device> devices;
  Status s = transport::tcp::findDevices(tcp, &devices);
  if (!s.ok() || devices.empty()) {
    RES_WARN(NCCL_NET | NCCL_INIT,
             "no interface for the liveness channel (%s): peers will not be "
             "watched for liveness",
             s.toString().c_str());
    return {};
  }
  SocketAddress a = devices.front().address;
  a.setPort(0);
  return a;
}

std::string hostName() {
  std::array<char, 256> buf{};
  if (gethostname(buf.data(), buf.size() - 1) != 0) {
    return "unknown-host";
  }
  return buf.data();
}

}  // namespace

Result<InnerSetup> makeInnerSetup(const config::Params& params, const SelfIdentity& self,
                                  ncclDebugLogger_t logger) {
  InnerSetup setup;
  const transport::tcp::TcpOptions tcp = tcpOptionsFrom(params);
  const std::string& inner = params.get<config::kInner>();
  if (inner == "tcp") {
    setup.transport = std::make_unique<transport::tcp::TcpTransport>(tcp);
  } else {
    transport::external::LoadOptions load;
    load.spec = inner;
    load.refuseSelf = true;
    load.selfSymbols.assign(self.symbols, self.symbols + self.count);
    // Its WARNs after our explanation of a fault name the fault's root cause.
    load.logger = logger != nullptr ? inner_log::logger() : nullptr;
    auto loaded = transport::external::loadExternalPlugin(load);
    if (!loaded.ok()) {
      return loaded.status();
    }
    noteNotWrapped(**loaded);
    setup.transport = std::move(loaded).value();
  }

  const std::string& faultSpec = params.get<config::kFault>();
  if (!faultSpec.empty()) {
    auto rules = transport::fault::parseFaultSpec(faultSpec);
    if (!rules.ok()) {
      return invalidUsage("NCCL_RESILIENT_FAULT: " + rules.status().message());
    }
    RES_WARN(NCCL_NET | NCCL_INIT, "fault injection is active: %s", faultSpec.c_str());
    setup.transport = std::make_unique<transport::fault::FaultTransport>(std::move(setup.transport),
                                                                         std::move(rules).value());
  }

  setup.watchdog.livenessTimeoutMs = params.get<config::kLivenessTimeoutMs>();
  setup.watchdog.progressTimeoutMs = params.get<config::kProgressTimeoutMs>();
  setup.watchdog.jobToken = params.get<config::kJobToken>();
  setup.watchdog.bindAddress = livenessAddress(tcp);
  setup.watchdog.hostName = hostName();
  setup.blackboxDir = params.get<config::kBlackboxDir>();
  return setup;
}

}  // namespace resilient::net
