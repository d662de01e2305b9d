// Every NCCL_RESILIENT_* knob, each declared once as a typed constant (see
// param_registry.h): its Knob<T> says what Params::get returns for it, its
// spec what docs/configuration.md shows. kAllKnobs, at the end, gives the
// documentation order; a knob left out of it cannot be read (get does not
// compile) and is not documented.
#pragma once

#include <string_view>

#include "common/log.h"
#include "common/param_registry.h"

namespace resilient::config {

// The choices of NCCL_RESILIENT_SOCKET_FAMILY, in order.
enum class SocketFamily { kAny, kInet, kInet6 };
// What a slow-link or straggler report does besides being reported
// (NCCL_RESILIENT_SLOW_LINK_ACTION, NCCL_RESILIENT_STRAGGLER_ACTION), in order.
enum class HealthAction { kReport, kRestart };

namespace detail {

inline bool validSubsystems(std::string_view text) {
  return log::parseSubsystems(text).has_value();
}
inline bool nonEmpty(std::string_view text) {
  return !text.empty();
}

}  // namespace detail

inline constexpr EnumKnob<log::Level> kLogLevel{{
    .name = "NCCL_RESILIENT_LOG_LEVEL",
    .defaultValue = "WARN",
    .choices = "NONE|VERSION|WARN|INFO|ABORT|TRACE",
    .inherits = "NCCL_DEBUG",
    .doc = "Verbosity of our messages. Under NCCL they go through NCCL's logger, which "
           "also applies NCCL_DEBUG; elsewhere they go to stderr. A wrapped plugin's INFO and "
           "TRACE pass it too; its WARNs always reach NCCL.",
}};
static_assert(static_cast<int>(log::Level::kNone) == 0 &&
                  static_cast<int>(log::Level::kVersion) == 1 &&
                  static_cast<int>(log::Level::kWarn) == 2 &&
                  static_cast<int>(log::Level::kInfo) == 3 &&
                  static_cast<int>(log::Level::kAbort) == 4 &&
                  static_cast<int>(log::Level::kTrace) == 5,
              "kLogLevel's choices are log::Level's values, in order");

inline constexpr StringKnob kLogSubsys{{
    .name = "NCCL_RESILIENT_LOG_SUBSYS",
    .defaultValue = "ALL",
    .inherits = "NCCL_DEBUG_SUBSYS",
    .validate = detail::validSubsystems,
    .accepted = "comma list of INIT, COLL, P2P, SHM, NET, GRAPH, TUNING, ENV, ALLOC, CALL, "
                "PROXY, NVLS, BOOTSTRAP, REG, PROFILE, RAS, RESTART, STORE or ALL; a "
                "leading ^ excludes the listed ones",
    .doc = "Subsystems whose INFO and TRACE messages are written (WARN always is).",
}};

inline constexpr IntKnob kWarnIntervalMs{{
    .name = "NCCL_RESILIENT_WARN_INTERVAL_MS",
    .defaultValue = "10000",
    .min = 0,
    .max = 3600000,
    .unit = "ms",
    .doc = "Minimum interval between two repeated warnings of one kind (for instance the "
           "same failing connection); 0 logs every occurrence.",
}};

inline constexpr StringKnob kInner{{
    .name = "NCCL_RESILIENT_INNER",
    .defaultValue = "tcp",
    .validate = detail::nonEmpty,
    .accepted = "tcp, or the name or path of another NCCL net plugin (resolved as "
                "NCCL_NET_PLUGIN is)",
    .doc = "The real transport the net plugin wraps: our own TCP, or any other NCCL net "
           "plugin library (never the resilient plugin itself).",
}};

inline constexpr StringKnob kSocketIfname{{
    .name = "NCCL_RESILIENT_SOCKET_IFNAME",
    .defaultValue = "",
    .inherits = "NCCL_SOCKET_IFNAME",
    .doc = "Interfaces for our TCP transport and liveness channel, in NCCL_SOCKET_IFNAME "
           "syntax (eth, ^docker, =eth0); empty picks like NCCL (lo and docker last).",
}};

inline constexpr EnumKnob<SocketFamily> kSocketFamily{{
    .name = "NCCL_RESILIENT_SOCKET_FAMILY",
    .defaultValue = "ANY",
    .choices = "ANY|AF_INET|AF_INET6",
    .inherits = "NCCL_SOCKET_FAMILY",
    .doc = "Address family of the interfaces our TCP transport uses.",
}};

inline constexpr IntKnob kSocketNsocks{{
    .name = "NCCL_RESILIENT_SOCKET_NSOCKS",
    .defaultValue = "2",
    .min = 1,
    .max = 63,
    .doc = "Data sockets each TCP connection stripes large messages over (besides its one "
           "control socket: 64 sockets per connection at most).",
}};

inline constexpr IntKnob kSocketNthreads{{
    .name = "NCCL_RESILIENT_SOCKET_NTHREADS",
    .defaultValue = "-1",
    .min = -1,
    .max = 16,
    .doc = "Helper threads per TCP connection serving its data sockets (at most one per "
           "socket); 0: none, NCCL's proxy thread moves the bytes itself in test(); -1: "
           "0 when the process may run on 4 CPUs or fewer, else 2.",
}};

inline constexpr IntKnob kSocketInlineBytes{{
    .name = "NCCL_RESILIENT_SOCKET_INLINE_BYTES",
    .defaultValue = "65536",
    .min = 0,
    .max = 1 << 20,
    .unit = "bytes",
    .doc = "TCP messages up to this size travel on the control socket with their header; "
           "larger ones are striped over the data sockets.",
}};

inline constexpr IntKnob kSocketChunkBytes{{
    .name = "NCCL_RESILIENT_SOCKET_CHUNK_BYTES",
    .defaultValue = "524288",
    .min = 4 << 10,
    .max = 16 << 20,
    .unit = "bytes",
    .doc = "Striping unit of large TCP messages over the data sockets (the connecting "
           "side's value is used).",
}};

inline constexpr IntKnob kSocketBufferBytes{{
    .name = "NCCL_RESILIENT_SOCKET_BUFFER_BYTES",
    .defaultValue = "0",
    .min = 0,
    .max = 1 << 30,
    .unit = "bytes",
    .doc = "SO_SNDBUF and SO_RCVBUF of every socket of our TCP transport (the kernel doubles "
           "the value and caps it at net.core.wmem_max / rmem_max); 0 leaves the buffers to "
           "the kernel's autotuning, as NCCL does. A fixed size makes every connection's "
           "bandwidth the same, where autotuning settles differently per connection.",
}};

inline constexpr IntKnob kConnectTimeoutMs{{
    .name = "NCCL_RESILIENT_CONNECT_TIMEOUT_MS",
    .defaultValue = "30000",
    .min = 100,
    .max = 3600000,
    .unit = "ms",
    .doc = "How long a connection attempt (TCP connect and handshake) may take before it "
           "fails; NCCL itself would poll forever.",
}};

inline constexpr IntKnob kTcpUserTimeoutMs{{
    .name = "NCCL_RESILIENT_TCP_USER_TIMEOUT_MS",
    .defaultValue = "10000",
    .min = 0,
    .max = 3600000,
    .unit = "ms",
    .doc = "TCP_USER_TIMEOUT of our sockets: unacknowledged data older than this fails the "
           "connection (0: the kernel default).",
}};

inline constexpr StringKnob kJobToken{{
    .name = "NCCL_RESILIENT_JOB_TOKEN",
    .defaultValue = "",
    .doc = "Shared secret of the job: the net plugin's handshakes refuse a peer that cannot "
           "prove it holds the same token (empty is a token like any other); the TCP store "
           "refuses clients with another token (empty: no check).",
}};

inline constexpr IntKnob kLivenessTimeoutMs{{
    .name = "NCCL_RESILIENT_LIVENESS_TIMEOUT_MS",
    .defaultValue = "1000",
    .min = 100,
    .max = 600000,
    .unit = "ms",
    .doc = "A peer that answers no heartbeat and sends no data for this long while requests "
           "to it are outstanding is a fault (process or host gone, frozen or unreachable).",
}};

inline constexpr IntKnob kProgressTimeoutMs{{
    .name = "NCCL_RESILIENT_PROGRESS_TIMEOUT_MS",
    .defaultValue = "300000",
    .min = 0,
    .max = 86400000,
    .unit = "ms",
    .doc = "A request outstanding with no bytes moving on its connection for this long, "
           "while the peer is alive, is a \"peer stuck\" fault (0 disables).",
}};

inline constexpr StringKnob kFault{{
    .name = "NCCL_RESILIENT_FAULT",
    .defaultValue = "",
    .doc = "Fault injection rules (docs/fault-injection.md); empty: no injection.",
}};

inline constexpr StringKnob kBlackboxDir{{
    .name = "NCCL_RESILIENT_BLACKBOX_DIR",
    .defaultValue = "/dev/shm",
    .doc = "Directory of the per-process blackbox file resilient-blackbox-<pid> (kept after "
           "a crash, removed on clean exit); empty: no blackbox.",
}};

inline constexpr BoolKnob kProfiler{{
    .name = "NCCL_RESILIENT_PROFILER",
    .defaultValue = "1",
    .doc = "Enables the profiler plugin (ncclProfiler_v7..v1 of both libraries); 0 makes its "
           "init ask NCCL for no events, so it tracks nothing and costs nothing.",
}};

inline constexpr IntKnob kCollTimeoutMs{{
    .name = "NCCL_RESILIENT_COLL_TIMEOUT_MS",
    .defaultValue = "300000",
    .min = 0,
    .max = 86400000,
    .unit = "ms",
    .doc = "An operation whose kernels started and whose kernel channels and proxy steps "
           "make no progress for this long is a hung-collective fault; operations enqueued "
           "with no proxy-thread event at all for this long are a silent-progress fault (0 "
           "disables both).",
}};

inline constexpr IntKnob kProfilerOps{{
    .name = "NCCL_RESILIENT_PROFILER_OPS",
    .defaultValue = "1024",
    .min = 16,
    .max = 16384,
    .unit = "operations",
    .doc = "Operations in flight the profiler tracks per communicator, preallocated at its "
           "init; beyond that, new operations are counted as dropped and not tracked.",
}};

inline constexpr BoolKnob kProfilerProxySteps{{
    .name = "NCCL_RESILIENT_PROFILER_PROXY_STEPS",
    .defaultValue = "1",
    .doc = "Asks NCCL for proxy-step events (one per network transfer): finer progress and "
           "the step state of a stuck channel, at the cost of more events.",
}};

inline constexpr IntKnob kFlightRecorderOps{{
    .name = "NCCL_RESILIENT_FLIGHT_RECORDER_OPS",
    .defaultValue = "256",
    .min = 8,
    .max = 65536,
    .unit = "operations",
    .doc = "Length of each communicator's flight-recorder ring in the blackbox: the last "
           "operations with their timings (fixed when the process creates its blackbox).",
}};

inline constexpr IntKnob kStoreTimeoutMs{{
    .name = "NCCL_RESILIENT_STORE_TIMEOUT_MS",
    .defaultValue = "300000",
    .min = 1,
    .max = 86400000,
    .unit = "ms",
    .doc = "Default timeout of a coordination store call (get, wait, barrier, ...) that "
           "names none itself.",
}};

inline constexpr IntKnob kStoreConnectTimeoutMs{{
    .name = "NCCL_RESILIENT_STORE_CONNECT_TIMEOUT_MS",
    .defaultValue = "60000",
    .min = 100,
    .max = 3600000,
    .unit = "ms",
    .doc = "How long a store client keeps retrying (exponential backoff with jitter) to "
           "reach the store at start-up.",
}};

inline constexpr IntKnob kStoreReconnectTimeoutMs{{
    .name = "NCCL_RESILIENT_STORE_RECONNECT_TIMEOUT_MS",
    .defaultValue = "5000",
    .min = 0,
    .max = 600000,
    .unit = "ms",
    .doc = "How long a TCP store client tries to reconnect after its connection broke "
           "before the call fails with \"connection lost\" (0: no reconnect).",
}};

inline constexpr IntKnob kStoreMemberTimeoutMs{{
    .name = "NCCL_RESILIENT_STORE_MEMBER_TIMEOUT_MS",
    .defaultValue = "2000",
    .min = 100,
    .max = 600000,
    .unit = "ms",
    .doc = "etcd store: how long one request may wait on one cluster member before the "
           "client tries the next member.",
}};

inline constexpr IntKnob kHealthCudaTimeoutMs{{
    .name = "NCCL_RESILIENT_HEALTH_CUDA_TIMEOUT_MS",
    .defaultValue = "30000",
    .min = 1,
    .max = 3600000,
    .unit = "ms",
    .doc = "Restart health check: how long the CUDA device may take to finish its queued "
           "work before the rank is declared unhealthy.",
}};

inline constexpr IntKnob kHealthNicErrorThreshold{{
    .name = "NCCL_RESILIENT_HEALTH_NIC_ERROR_THRESHOLD",
    .defaultValue = "100",
    .min = 0,
    .max = 2147483647,
    .unit = "errors",
    .doc = "Restart health check: new rx+tx errors of an interface (or link error "
           "recoveries of an IB port) between two checks above which the NIC fails.",
}};

inline constexpr StringKnob kStoreUrl{{
    .name = "NCCL_RESILIENT_STORE_URL",
    .defaultValue = "",
    .doc = "The job's coordination store for the restart library: tcp://host:port, "
           "etcd://host:port[,host:port] or memory (one process).",
}};

inline constexpr StringKnob kRestartJob{{
    .name = "NCCL_RESILIENT_RESTART_JOB",
    .defaultValue = "default",
    .doc = "Name of the job's keys in the store (several jobs may share one store); no '/'.",
}};

inline constexpr BoolKnob kRestartEnabled{{
    .name = "NCCL_RESILIENT_RESTART_ENABLED",
    .defaultValue = "1",
    .doc = "0: Wrapper::run calls the function once, with no restart machinery.",
}};

inline constexpr BoolKnob kRestartMonitorProcess{{
    .name = "NCCL_RESILIENT_RESTART_MONITOR_PROCESS",
    .defaultValue = "1",
    .doc = "Starts a resilient-monitor process per rank (heartbeats, hard timeout, death "
           "records).",
}};

inline constexpr BoolKnob kRestartTerminateCulprits{{
    .name = "NCCL_RESILIENT_RESTART_TERMINATE_CULPRITS",
    .defaultValue = "1",
    .doc = "A rank the plugins' signals name as a fault's culprit is terminated and replaced "
           "by a spare.",
}};

inline constexpr IntKnob kRestartMonitorThreadIntervalMs{{
    .name = "NCCL_RESILIENT_RESTART_MONITOR_THREAD_INTERVAL_MS",
    .defaultValue = "1000",
    .min = 1,
    .max = 3600000,
    .unit = "ms",
    .doc = "Chunk of the monitor thread's blocking store wait (and of the loop's interruptible "
           "waits, at most 100 ms).",
}};

inline constexpr IntKnob kRestartMonitorProcessIntervalMs{{
    .name = "NCCL_RESILIENT_RESTART_MONITOR_PROCESS_INTERVAL_MS",
    .defaultValue = "1000",
    .min = 1,
    .max = 3600000,
    .unit = "ms",
    .doc = "How often the monitor process checks its rank (alive, progress) and its sibling's "
           "heartbeat.",
}};

inline constexpr IntKnob kRestartHeartbeatIntervalMs{{
    .name = "NCCL_RESILIENT_RESTART_HEARTBEAT_INTERVAL_MS",
    .defaultValue = "1000",
    .min = 1,
    .max = 3600000,
    .unit = "ms",
    .doc = "How often the monitor process refreshes its rank's heartbeat in the store.",
}};

inline constexpr IntKnob kRestartProgressWatchdogIntervalMs{{
    .name = "NCCL_RESILIENT_RESTART_PROGRESS_WATCHDOG_INTERVAL_MS",
    .defaultValue = "1000",
    .min = 1,
    .max = 3600000,
    .unit = "ms",
    .doc = "How often the progress watchdog reads the blackbox for completed operations.",
}};

inline constexpr IntKnob kRestartSoftTimeoutMs{{
    .name = "NCCL_RESILIENT_RESTART_SOFT_TIMEOUT_MS",
    .defaultValue = "60000",
    .min = 1,
    .max = 86400000,
    .unit = "ms",
    .doc = "No progress for this long: a cooperative restart (the rank is interrupted, not "
           "killed).",
}};

inline constexpr IntKnob kRestartHardTimeoutMs{{
    .name = "NCCL_RESILIENT_RESTART_HARD_TIMEOUT_MS",
    .defaultValue = "90000",
    .min = 1,
    .max = 86400000,
    .unit = "ms",
    .doc = "No progress for this long: the monitor process terminates the rank (SIGTERM, "
           "grace, SIGKILL).",
}};

inline constexpr IntKnob kRestartHeartbeatTimeoutMs{{
    .name = "NCCL_RESILIENT_RESTART_HEARTBEAT_TIMEOUT_MS",
    .defaultValue = "30000",
    .min = 1,
    .max = 86400000,
    .unit = "ms",
    .doc = "A heartbeat older than this marks the rank unresponsive (its node is presumed lost).",
}};

inline constexpr IntKnob kRestartBarrierTimeoutMs{{
    .name = "NCCL_RESILIENT_RESTART_BARRIER_TIMEOUT_MS",
    .defaultValue = "120000",
    .min = 1,
    .max = 86400000,
    .unit = "ms",
    .doc = "Longest wait at the initial, iteration and termination barriers; ranks still "
           "missing at the iteration barrier are declared dead.",
}};

inline constexpr IntKnob kRestartCompletionTimeoutMs{{
    .name = "NCCL_RESILIENT_RESTART_COMPLETION_TIMEOUT_MS",
    .defaultValue = "120000",
    .min = 1,
    .max = 86400000,
    .unit = "ms",
    .doc = "Longest wait at the completion barrier for the other ranks to finish.",
}};

inline constexpr IntKnob kRestartTerminationGraceMs{{
    .name = "NCCL_RESILIENT_RESTART_TERMINATION_GRACE_MS",
    .defaultValue = "5000",
    .min = 0,
    .max = 3600000,
    .unit = "ms",
    .doc = "Time between the monitor process's SIGTERM and SIGKILL of a hung rank.",
}};

inline constexpr IntKnob kRestartFinalizeTimeoutMs{{
    .name = "NCCL_RESILIENT_RESTART_FINALIZE_TIMEOUT_MS",
    .defaultValue = "30000",
    .min = 1,
    .max = 86400000,
    .unit = "ms",
    .doc = "Longest run of the finalize hook; overrunning makes the rank unhealthy.",
}};

inline constexpr IntKnob kRestartHealthCheckTimeoutMs{{
    .name = "NCCL_RESILIENT_RESTART_HEALTH_CHECK_TIMEOUT_MS",
    .defaultValue = "60000",
    .min = 1,
    .max = 86400000,
    .unit = "ms",
    .doc = "Longest run of the health checks; overrunning makes the rank unhealthy.",
}};

inline constexpr IntKnob kRestartCommunicatorTimeoutMs{{
    .name = "NCCL_RESILIENT_RESTART_COMMUNICATOR_TIMEOUT_MS",
    .defaultValue = "60000",
    .min = 1,
    .max = 86400000,
    .unit = "ms",
    .doc = "Longest creation of one iteration's communicator (id exchange and init).",
}};

inline constexpr BoolKnob kRestartAutoHealthChecks{{
    .name = "NCCL_RESILIENT_RESTART_AUTO_HEALTH_CHECKS",
    .defaultValue = "1",
    .doc = "At every restart, chain the stock checks before the user's: CUDA and GPU "
           "recovery action when a GPU is usable, the NICs' link state and error counters.",
}};

inline constexpr IntKnob kRestartStormLimit{{
    .name = "NCCL_RESILIENT_RESTART_STORM_LIMIT",
    .defaultValue = "10",
    .min = 0,
    .max = 1000000,
    .unit = "restarts",
    .doc = "Restart storms: the job may restart at most this often within the storm window; "
           "the next restart ends it on every rank with one error naming the recurring fault "
           "(0: no limit).",
}};

inline constexpr IntKnob kRestartStormWindowMs{{
    .name = "NCCL_RESILIENT_RESTART_STORM_WINDOW_MS",
    .defaultValue = "600000",
    .min = 1,
    .max = 604800000,
    .unit = "ms",
    .doc = "The window in which NCCL_RESILIENT_RESTART_STORM_LIMIT restarts are counted.",
}};

inline constexpr IntKnob kRestartBackoffMs{{
    .name = "NCCL_RESILIENT_RESTART_BACKOFF_MS",
    .defaultValue = "100",
    .min = 0,
    .max = 3600000,
    .unit = "ms",
    .doc =
        "Back-off before the second restart within the storm window (the first waits for "
        "nothing); it doubles with every further one, up to NCCL_RESILIENT_RESTART_BACKOFF_MAX_MS.",
}};

inline constexpr IntKnob kRestartBackoffMaxMs{{
    .name = "NCCL_RESILIENT_RESTART_BACKOFF_MAX_MS",
    .defaultValue = "10000",
    .min = 0,
    .max = 3600000,
    .unit = "ms",
    .doc = "The longest back-off between two restarts.",
}};

inline constexpr IntKnob kHealthIntervalMs{{
    .name = "NCCL_RESILIENT_HEALTH_INTERVAL_MS",
    .defaultValue = "1000",
    .min = 0,
    .max = 3600000,
    .unit = "ms",
    .doc = "How often each rank of a restart-library job ships its links' busy time and its "
           "collectives' arrival times to the store, and active rank 0 compares them for slow "
           "links and stragglers (0: no comparison).",
}};

inline constexpr IntKnob kSlowLinkPercent{{
    .name = "NCCL_RESILIENT_SLOW_LINK_PERCENT",
    .defaultValue = "40",
    .min = 1,
    .max = 99,
    .unit = "%",
    .doc = "A sending link whose throughput while busy stays below this share of the median "
           "of the job's other sending links (or of its own best window) is reported slow.",
}};

inline constexpr IntKnob kSlowLinkWindowMs{{
    .name = "NCCL_RESILIENT_SLOW_LINK_WINDOW_MS",
    .defaultValue = "4000",
    .min = 100,
    .max = 3600000,
    .unit = "ms",
    .doc = "The window a link's throughput is measured over; it is reported once it stayed "
           "slow for half a window more.",
}};

inline constexpr EnumKnob<HealthAction> kSlowLinkAction{{
    .name = "NCCL_RESILIENT_SLOW_LINK_ACTION",
    .defaultValue = "report",
    .choices = "report|restart",
    .doc = "What a slow link does: report (a WARN, a store and a blackbox record; nothing "
           "aborts) or restart (also a fault naming the sending rank, so that the job "
           "restarts, and a policy may replace it).",
}};

inline constexpr IntKnob kStragglerLagMs{{
    .name = "NCCL_RESILIENT_STRAGGLER_LAG_MS",
    .defaultValue = "20",
    .min = 1,
    .max = 3600000,
    .unit = "ms",
    .doc = "A rank that enqueues most collectives of a communicator last, this much or more "
           "(median) after the median rank, is reported as a straggler.",
}};

inline constexpr IntKnob kStragglerWindowMs{{
    .name = "NCCL_RESILIENT_STRAGGLER_WINDOW_MS",
    .defaultValue = "10000",
    .min = 100,
    .max = 3600000,
    .unit = "ms",
    .doc = "The window of collectives a straggler is judged over: of the collectives that "
           "waited NCCL_RESILIENT_STRAGGLER_LAG_MS or more for their last rank (at least 8), "
           "it was last in three quarters.",
}};

inline constexpr EnumKnob<HealthAction> kStragglerAction{{
    .name = "NCCL_RESILIENT_STRAGGLER_ACTION",
    .defaultValue = "report",
    .choices = "report|restart",
    .doc = "What a straggler does: report (a WARN, a store and a blackbox record; nothing "
           "aborts) or restart (also a fault naming it, so that the job restarts and a policy "
           "may replace it with a spare).",
}};

inline constexpr IntKnob kStuckRankTimeoutMs{{
    .name = "NCCL_RESILIENT_STUCK_RANK_TIMEOUT_MS",
    .defaultValue = "8000",
    .min = 100,
    .max = 86400000,
    .unit = "ms",
    .doc = "A live rank that has not entered a collective which other ranks of its "
           "communicator have waited in this long, while it is inside no collective itself and "
           "neither pings nor has hang protection off, is reported as a stuck rank (at most a "
           "health interval later: within 10 s of the others' wait by default).",
}};

inline constexpr EnumKnob<HealthAction> kStuckRankAction{{
    .name = "NCCL_RESILIENT_STUCK_RANK_ACTION",
    .defaultValue = "report",
    .choices = "report|restart",
    .doc = "What a stuck rank does: report (a WARN, a store and a blackbox record; nothing "
           "aborts) or restart (also a fault naming it, so that the job restarts and a policy "
           "may replace it with a spare).",
}};

// Set by resilient-run (tools/run/) for the processes it starts; docs/restart.md, "The agent".
inline constexpr BoolKnob kRestartJoin{{
    .name = "NCCL_RESILIENT_RESTART_JOIN",
    .defaultValue = "0",
    .doc = "This process replaces one that left a running job: after its health check it "
           "registers as a new spare (a new initial rank after the job's others) instead of "
           "claiming RANK, and the job's next restart brings it in. Set by resilient-run for "
           "the processes it starts in place of others.",
}};

inline constexpr BoolKnob kRestartExitForNewProcess{{
    .name = "NCCL_RESILIENT_RESTART_EXIT_FOR_NEW_PROCESS",
    .defaultValue = "0",
    .doc = "A rank whose health check finds that only a new process can use its GPU again (a "
           "sticky CUDA error, a GPU that needs a reset) leaves the job and exits with code 75 "
           "after its terminate hook, instead of Wrapper::run throwing RankNeedsNewProcess (a "
           "joiner that withdrew, its number another process's: code 76). Set by resilient-run, "
           "which starts a new process in its place.",
}};

// Every knob, in the order of docs/configuration.md.
inline constexpr auto kAllKnobs = listKnobs(
    kLogLevel, kLogSubsys, kWarnIntervalMs, kInner, kSocketIfname, kSocketFamily, kSocketNsocks,
    kSocketNthreads, kSocketInlineBytes, kSocketChunkBytes, kSocketBufferBytes, kConnectTimeoutMs,
    kTcpUserTimeoutMs, kJobToken, kLivenessTimeoutMs, kProgressTimeoutMs, kFault, kBlackboxDir,
    kProfiler, kCollTimeoutMs, kProfilerOps, kProfilerProxySteps, kFlightRecorderOps,
    kStoreTimeoutMs, kStoreConnectTimeoutMs, kStoreReconnectTimeoutMs, kStoreMemberTimeoutMs,
    kHealthCudaTimeoutMs, kHealthNicErrorThreshold, kStoreUrl, kRestartJob, kRestartEnabled,
    kRestartMonitorProcess, kRestartTerminateCulprits, kRestartMonitorThreadIntervalMs,
    kRestartMonitorProcessIntervalMs, kRestartHeartbeatIntervalMs,
    kRestartProgressWatchdogIntervalMs, kRestartSoftTimeoutMs, kRestartHardTimeoutMs,
    kRestartHeartbeatTimeoutMs, kRestartBarrierTimeoutMs, kRestartCompletionTimeoutMs,
    kRestartTerminationGraceMs, kRestartFinalizeTimeoutMs,
    kRestartHealthCheckTimeoutMs, kRestartCommunicatorTimeoutMs, kRestartAutoHealthChecks,
    kRestartStormLimit, kRestartStormWindowMs, kRestartBackoffMs, kRestartBackoffMaxMs,
    kHealthIntervalMs, kSlowLinkPercent, kSlowLinkWindowMs, kSlowLinkAction, kStragglerLagMs,
    kStragglerWindowMs, kStragglerAction, kStuckRankTimeoutMs, kStuckRankAction, kRestartJoin,
    kRestartExitForNewProcess);

// The position of `spec` in kAllKnobs, or kAllKnobs.size() when it is not there.
// By name, which listKnobs keeps unique: comparing the addresses of two
// different knobs is not a constant expression under the sanitizers.
consteval size_t knobIndex(const ParamSpec& spec) {
  for (size_t i = 0; i < kAllKnobs.size(); ++i) {
    if (std::string_view(kAllKnobs[i]->name) == std::string_view(spec.name)) {
      return i;
    }
  }
  return kAllKnobs.size();
}

}  // namespace resilient::config
