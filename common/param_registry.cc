#include "common/param_registry.h"

#include <array>

#include "common/log.h"

namespace resilient::config {
namespace {

bool validSubsystems(std::string_view text) {
  return log::parseSubsystems(text).has_value();
}
bool nonEmpty(std::string_view text) {
  return !text.empty();
}

constexpr auto kRegistry = std::to_array<ParamSpec>({
    {
        .id = static_cast<int>(Param::kLogLevel),
        .name = "NCCL_RESILIENT_LOG_LEVEL",
        .type = ParamType::kEnum,
        .defaultValue = "WARN",
        .choices = "NONE|VERSION|WARN|INFO|ABORT|TRACE",
        .inherits = "NCCL_DEBUG",
        .doc = "Verbosity of our messages. Under NCCL they go through NCCL's logger, which "
               "also applies NCCL_DEBUG; elsewhere they go to stderr.",
    },
    {
        .id = static_cast<int>(Param::kLogSubsys),
        .name = "NCCL_RESILIENT_LOG_SUBSYS",
        .type = ParamType::kString,
        .defaultValue = "ALL",
        .inherits = "NCCL_DEBUG_SUBSYS",
        .validate = validSubsystems,
        .accepted = "comma list of INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, CALL, "
                    "PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS, RESTART, STORE or ALL; a "
                    "leading ^ excludes the listed ones",
        .doc = "Subsystems whose INFO and TRACE messages are written (WARN always is).",
    },
    {
        .id = static_cast<int>(Param::kWarnIntervalMs),
        .name = "NCCL_RESILIENT_WARN_INTERVAL_MS",
        .type = ParamType::kInt,
        .defaultValue = "10000",
        .min = 0,
        .max = 3600000,
        .unit = "ms",
        .doc = "Minimum interval between two repeated warnings of one kind (for instance the "
               "same failing connection); 0 logs every occurrence.",
    },
    {
        .id = static_cast<int>(Param::kInner),
        .name = "NCCL_RESILIENT_INNER",
        .type = ParamType::kString,
        .defaultValue = "tcp",
        .validate = nonEmpty,
        .accepted = "tcp, or the name or path of another NCCL net plugin (resolved as "
                    "NCCL_NET_PLUGIN is)",
        .doc = "The real transport the net plugin wraps: our own TCP, or any other NCCL net "
               "plugin library (never the resilient plugin itself).",
    },
    {
        .id = static_cast<int>(Param::kSocketIfname),
        .name = "NCCL_RESILIENT_SOCKET_IFNAME",
        .type = ParamType::kString,
        .defaultValue = "",
        .inherits = "NCCL_SOCKET_IFNAME",
        .doc = "Interfaces for our TCP transport and liveness channel, in NCCL_SOCKET_IFNAME "
               "syntax (eth, ^docker, =eth0); empty picks like NCCL (lo and docker last).",
    },
    {
        .id = static_cast<int>(Param::kSocketFamily),
        .name = "NCCL_RESILIENT_SOCKET_FAMILY",
        .type = ParamType::kEnum,
        .defaultValue = "ANY",
        .choices = "ANY|AF_INET|AF_INET6",
        .inherits = "NCCL_SOCKET_FAMILY",
        .doc = "Address family of the interfaces our TCP transport uses.",
    },
    {
        .id = static_cast<int>(Param::kSocketNsocks),
        .name = "NCCL_RESILIENT_SOCKET_NSOCKS",
        .type = ParamType::kInt,
        .defaultValue = "2",
        .min = 1,
        .max = 64,
        .doc = "Data sockets each TCP connection stripes large messages over.",
    },
    {
        .id = static_cast<int>(Param::kSocketNthreads),
        .name = "NCCL_RESILIENT_SOCKET_NTHREADS",
        .type = ParamType::kInt,
        .defaultValue = "-1",
        .min = -1,
        .max = 16,
        .doc = "Helper threads per TCP connection serving its data sockets (at most one per "
               "socket); 0: none, NCCL's proxy thread moves the bytes itself in test(); -1: "
               "0 when the process may run on 4 CPUs or fewer, else 2.",
    },
    {
        .id = static_cast<int>(Param::kSocketInlineBytes),
        .name = "NCCL_RESILIENT_SOCKET_INLINE_BYTES",
        .type = ParamType::kInt,
        .defaultValue = "65536",
        .min = 0,
        .max = 1 << 20,
        .unit = "bytes",
        .doc = "TCP messages up to this size travel on the control socket with their header; "
               "larger ones are striped over the data sockets.",
    },
    {
        .id = static_cast<int>(Param::kSocketChunkBytes),
        .name = "NCCL_RESILIENT_SOCKET_CHUNK_BYTES",
        .type = ParamType::kInt,
        .defaultValue = "524288",
        .min = 4 << 10,
        .max = 16 << 20,
        .unit = "bytes",
        .doc = "Striping unit of large TCP messages over the data sockets (the connecting "
               "side's value is used).",
    },
    {
        .id = static_cast<int>(Param::kSocketBufferBytes),
        .name = "NCCL_RESILIENT_SOCKET_BUFFER_BYTES",
        .type = ParamType::kInt,
        .defaultValue = "0",
        .min = 0,
        .max = 1 << 30,
        .unit = "bytes",
        .doc = "SO_SNDBUF and SO_RCVBUF of every socket of our TCP transport (the kernel doubles "
               "the value and caps it at net.core.wmem_max / rmem_max); 0 leaves the buffers to "
               "the kernel's autotuning, as NCCL does. A fixed size makes every connection's "
               "bandwidth the same, where autotuning settles differently per connection.",
    },
    {
        .id = static_cast<int>(Param::kConnectTimeoutMs),
        .name = "NCCL_RESILIENT_CONNECT_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "30000",
        .min = 100,
        .max = 3600000,
        .unit = "ms",
        .doc = "How long a connection attempt (TCP connect and handshake) may take before it "
               "fails; NCCL itself would poll forever.",
    },
    {
        .id = static_cast<int>(Param::kTcpUserTimeoutMs),
        .name = "NCCL_RESILIENT_TCP_USER_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "10000",
        .min = 0,
        .max = 3600000,
        .unit = "ms",
        .doc = "TCP_USER_TIMEOUT of our sockets: unacknowledged data older than this fails the "
               "connection (0: the kernel default).",
    },
    {
        .id = static_cast<int>(Param::kJobToken),
        .name = "NCCL_RESILIENT_JOB_TOKEN",
        .type = ParamType::kString,
        .defaultValue = "",
        .doc = "Shared secret of the job: peers whose handshake carries another token are "
               "refused (empty: no check).",
    },
    {
        .id = static_cast<int>(Param::kLivenessTimeoutMs),
        .name = "NCCL_RESILIENT_LIVENESS_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "1500",
        .min = 100,
        .max = 600000,
        .unit = "ms",
        .doc = "A peer that answers no heartbeat for this long while requests to it are "
               "outstanding is a fault (process or host gone, frozen or unreachable).",
    },
    {
        .id = static_cast<int>(Param::kProgressTimeoutMs),
        .name = "NCCL_RESILIENT_PROGRESS_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "300000",
        .min = 0,
        .max = 86400000,
        .unit = "ms",
        .doc = "A request outstanding with no bytes moving on its connection for this long, "
               "while the peer is alive, is a \"peer stuck\" fault (0 disables).",
    },
    {
        .id = static_cast<int>(Param::kFault),
        .name = "NCCL_RESILIENT_FAULT",
        .type = ParamType::kString,
        .defaultValue = "",
        .doc = "Fault injection rules (docs/fault-injection.md); empty: no injection.",
    },
    {
        .id = static_cast<int>(Param::kBlackboxDir),
        .name = "NCCL_RESILIENT_BLACKBOX_DIR",
        .type = ParamType::kString,
        .defaultValue = "/dev/shm",
        .doc = "Directory of the per-process blackbox file resilient-blackbox-<pid> (kept after "
               "a crash, removed on clean exit); empty: no blackbox.",
    },
    {
        .id = static_cast<int>(Param::kProfiler),
        .name = "NCCL_RESILIENT_PROFILER",
        .type = ParamType::kBool,
        .defaultValue = "1",
        .doc = "Enables the profiler plugin (ncclProfiler_v5..v1 of both libraries); 0 makes its "
               "init ask NCCL for no events, so it tracks nothing and costs nothing.",
    },
    {
        .id = static_cast<int>(Param::kCollTimeoutMs),
        .name = "NCCL_RESILIENT_COLL_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "300000",
        .min = 0,
        .max = 86400000,
        .unit = "ms",
        .doc = "An operation whose kernels started and whose kernel channels and proxy steps "
               "make no progress for this long is a hung-collective fault; operations enqueued "
               "with no proxy-thread event at all for this long are a silent-progress fault (0 "
               "disables both).",
    },
    {
        .id = static_cast<int>(Param::kProfilerOps),
        .name = "NCCL_RESILIENT_PROFILER_OPS",
        .type = ParamType::kInt,
        .defaultValue = "1024",
        .min = 16,
        .max = 16384,
        .unit = "operations",
        .doc = "Operations in flight the profiler tracks per communicator, preallocated at its "
               "init; beyond that, new operations are counted as dropped and not tracked.",
    },
    {
        .id = static_cast<int>(Param::kProfilerProxySteps),
        .name = "NCCL_RESILIENT_PROFILER_PROXY_STEPS",
        .type = ParamType::kBool,
        .defaultValue = "1",
        .doc = "Asks NCCL for proxy-step events (one per network transfer): finer progress and "
               "the step state of a stuck channel, at the cost of more events.",
    },
    {
        .id = static_cast<int>(Param::kFlightRecorderOps),
        .name = "NCCL_RESILIENT_FLIGHT_RECORDER_OPS",
        .type = ParamType::kInt,
        .defaultValue = "256",
        .min = 8,
        .max = 65536,
        .unit = "operations",
        .doc = "Length of each communicator's flight-recorder ring in the blackbox: the last "
               "operations with their timings (fixed when the process creates its blackbox).",
    },
    {
        .id = static_cast<int>(Param::kStoreTimeoutMs),
        .name = "NCCL_RESILIENT_STORE_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "300000",
        .min = 1,
        .max = 86400000,
        .unit = "ms",
        .doc = "Default timeout of a coordination store call (get, wait, barrier, ...) that "
               "names none itself.",
    },
    {
        .id = static_cast<int>(Param::kStoreConnectTimeoutMs),
        .name = "NCCL_RESILIENT_STORE_CONNECT_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "60000",
        .min = 100,
        .max = 3600000,
        .unit = "ms",
        .doc = "How long a store client keeps retrying (exponential backoff with jitter) to "
               "reach the store at start-up.",
    },
    {
        .id = static_cast<int>(Param::kStoreReconnectTimeoutMs),
        .name = "NCCL_RESILIENT_STORE_RECONNECT_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "5000",
        .min = 0,
        .max = 600000,
        .unit = "ms",
        .doc = "How long a TCP store client tries to reconnect after its connection broke "
               "before the call fails with \"connection lost\" (0: no reconnect).",
    },
    {
        .id = static_cast<int>(Param::kStoreMemberTimeoutMs),
        .name = "NCCL_RESILIENT_STORE_MEMBER_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "2000",
        .min = 100,
        .max = 600000,
        .unit = "ms",
        .doc = "etcd store: how long one request may wait on one cluster member before the "
               "client tries the next member.",
    },
    {
        .id = static_cast<int>(Param::kHealthCudaTimeoutMs),
        .name = "NCCL_RESILIENT_HEALTH_CUDA_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "30000",
        .min = 1,
        .max = 3600000,
        .unit = "ms",
        .doc = "Restart health check: how long the CUDA device may take to finish its queued "
               "work before the rank is declared unhealthy.",
    },
    {
        .id = static_cast<int>(Param::kHealthNicErrorThreshold),
        .name = "NCCL_RESILIENT_HEALTH_NIC_ERROR_THRESHOLD",
        .type = ParamType::kInt,
        .defaultValue = "100",
        .min = 0,
        .max = 2147483647,
        .unit = "errors",
        .doc = "Restart health check: new rx+tx errors of an interface (or link error "
               "recoveries of an IB port) between two checks above which the NIC fails.",
    },
    {
        .id = static_cast<int>(Param::kStoreUrl),
        .name = "NCCL_RESILIENT_STORE_URL",
        .type = ParamType::kString,
        .defaultValue = "",
        .doc = "The job's coordination store for the restart library: tcp://host:port, "
               "etcd://host:port[,host:port] or memory (one process).",
    },
    {
        .id = static_cast<int>(Param::kRestartJob),
        .name = "NCCL_RESILIENT_RESTART_JOB",
        .type = ParamType::kString,
        .defaultValue = "default",
        .doc = "Name of the job's keys in the store (several jobs may share one store); no '/'.",
    },
    {
        .id = static_cast<int>(Param::kRestartEnabled),
        .name = "NCCL_RESILIENT_RESTART_ENABLED",
        .type = ParamType::kBool,
        .defaultValue = "1",
        .doc = "0: Wrapper::run calls the function once, with no restart machinery.",
    },
    {
        .id = static_cast<int>(Param::kRestartMonitorProcess),
        .name = "NCCL_RESILIENT_RESTART_MONITOR_PROCESS",
        .type = ParamType::kBool,
        .defaultValue = "1",
        .doc = "Starts a resilient-monitor process per rank (heartbeats, hard timeout, death "
               "records).",
    },
    {
        .id = static_cast<int>(Param::kRestartTerminateCulprits),
        .name = "NCCL_RESILIENT_RESTART_TERMINATE_CULPRITS",
        .type = ParamType::kBool,
        .defaultValue = "1",
        .doc = "A rank the plugins' signals name as a fault's culprit is terminated and replaced "
               "by a spare.",
    },
    {
        .id = static_cast<int>(Param::kRestartMonitorThreadIntervalMs),
        .name = "NCCL_RESILIENT_RESTART_MONITOR_THREAD_INTERVAL_MS",
        .type = ParamType::kInt,
        .defaultValue = "1000",
        .min = 1,
        .max = 3600000,
        .unit = "ms",
        .doc = "Chunk of the monitor thread's blocking store wait (and of the loop's interruptible "
               "waits, at most 100 ms).",
    },
    {
        .id = static_cast<int>(Param::kRestartMonitorProcessIntervalMs),
        .name = "NCCL_RESILIENT_RESTART_MONITOR_PROCESS_INTERVAL_MS",
        .type = ParamType::kInt,
        .defaultValue = "1000",
        .min = 1,
        .max = 3600000,
        .unit = "ms",
        .doc = "How often the monitor process checks its rank (alive, progress) and its sibling's "
               "heartbeat.",
    },
    {
        .id = static_cast<int>(Param::kRestartHeartbeatIntervalMs),
        .name = "NCCL_RESILIENT_RESTART_HEARTBEAT_INTERVAL_MS",
        .type = ParamType::kInt,
        .defaultValue = "1000",
        .min = 1,
        .max = 3600000,
        .unit = "ms",
        .doc = "How often the monitor process refreshes its rank's heartbeat in the store.",
    },
    {
        .id = static_cast<int>(Param::kRestartProgressWatchdogIntervalMs),
        .name = "NCCL_RESILIENT_RESTART_PROGRESS_WATCHDOG_INTERVAL_MS",
        .type = ParamType::kInt,
        .defaultValue = "1000",
        .min = 1,
        .max = 3600000,
        .unit = "ms",
        .doc = "How often the progress watchdog reads the blackbox for completed operations.",
    },
    {
        .id = static_cast<int>(Param::kRestartSoftTimeoutMs),
        .name = "NCCL_RESILIENT_RESTART_SOFT_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "60000",
        .min = 1,
        .max = 86400000,
        .unit = "ms",
        .doc = "No progress for this long: a cooperative restart (the rank is interrupted, not "
               "killed).",
    },
    {
        .id = static_cast<int>(Param::kRestartHardTimeoutMs),
        .name = "NCCL_RESILIENT_RESTART_HARD_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "90000",
        .min = 1,
        .max = 86400000,
        .unit = "ms",
        .doc = "No progress for this long: the monitor process terminates the rank (SIGTERM, "
               "grace, SIGKILL).",
    },
    {
        .id = static_cast<int>(Param::kRestartHeartbeatTimeoutMs),
        .name = "NCCL_RESILIENT_RESTART_HEARTBEAT_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "30000",
        .min = 1,
        .max = 86400000,
        .unit = "ms",
        .doc =
            "A heartbeat older than this marks the rank unresponsive (its node is presumed lost).",
    },
    {
        .id = static_cast<int>(Param::kRestartBarrierTimeoutMs),
        .name = "NCCL_RESILIENT_RESTART_BARRIER_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "120000",
        .min = 1,
        .max = 86400000,
        .unit = "ms",
        .doc = "Longest wait at the initial, iteration and termination barriers; ranks still "
               "missing at the iteration barrier are declared dead.",
    },
    {
        .id = static_cast<int>(Param::kRestartCompletionTimeoutMs),
        .name = "NCCL_RESILIENT_RESTART_COMPLETION_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "120000",
        .min = 1,
        .max = 86400000,
        .unit = "ms",
        .doc = "Longest wait at the completion barrier for the other ranks to finish.",
    },
    {
        .id = static_cast<int>(Param::kRestartLastCallWaitMs),
        .name = "NCCL_RESILIENT_RESTART_LAST_CALL_WAIT_MS",
        .type = ParamType::kInt,
        .defaultValue = "1000",
        .min = 0,
        .max = 3600000,
        .unit = "ms",
        .doc = "Window after the first fault of an iteration in which concurrent faults count "
               "(culprits); the abort starts after it.",
    },
    {
        .id = static_cast<int>(Param::kRestartTerminationGraceMs),
        .name = "NCCL_RESILIENT_RESTART_TERMINATION_GRACE_MS",
        .type = ParamType::kInt,
        .defaultValue = "5000",
        .min = 0,
        .max = 3600000,
        .unit = "ms",
        .doc = "Time between the monitor process's SIGTERM and SIGKILL of a hung rank.",
    },
    {
        .id = static_cast<int>(Param::kRestartFinalizeTimeoutMs),
        .name = "NCCL_RESILIENT_RESTART_FINALIZE_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "30000",
        .min = 1,
        .max = 86400000,
        .unit = "ms",
        .doc = "Longest run of the finalize hook; overrunning makes the rank unhealthy.",
    },
    {
        .id = static_cast<int>(Param::kRestartHealthCheckTimeoutMs),
        .name = "NCCL_RESILIENT_RESTART_HEALTH_CHECK_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "60000",
        .min = 1,
        .max = 86400000,
        .unit = "ms",
        .doc = "Longest run of the health checks; overrunning makes the rank unhealthy.",
    },
    {
        .id = static_cast<int>(Param::kRestartCommunicatorTimeoutMs),
        .name = "NCCL_RESILIENT_RESTART_COMMUNICATOR_TIMEOUT_MS",
        .type = ParamType::kInt,
        .defaultValue = "60000",
        .min = 1,
        .max = 86400000,
        .unit = "ms",
        .doc = "Longest creation of one iteration's communicator (id exchange and init).",
    },
    {
        .id = static_cast<int>(Param::kRestartAutoHealthChecks),
        .name = "NCCL_RESILIENT_RESTART_AUTO_HEALTH_CHECKS",
        .type = ParamType::kBool,
        .defaultValue = "1",
        .doc = "At every restart, chain the stock checks before the user's: CUDA and GPU "
               "recovery action when a GPU is usable, the NICs' link state and error counters.",
    },
});

constexpr bool idsMatchPositions() {
  for (size_t i = 0; i < kRegistry.size(); ++i) {
    if (kRegistry[i].id != static_cast<int>(i)) {
      return false;
    }
  }
  return kRegistry.size() == static_cast<size_t>(Param::kCount);
}
static_assert(idsMatchPositions(), "kRegistry rows must follow the order of enum Param");

}  // namespace

std::span<const ParamSpec> registry() noexcept {
  return kRegistry;
}

}  // namespace resilient::config
