// The monitor's end of its rank's liveness link (restart/loop/monitoring/rank_liveness.h
// is the rank's), on a thread of its own: it pings the rank every quarter of
// NCCL_RESILIENT_LIVENESS_TIMEOUT_MS and judges its silence with the net
// plugin's rules (net::liveness::StreamLink), whatever the monitor's loop is
// doing: a store call that blocks the loop for a second must not stop the
// pings, or the rank's answers to them, and make a live rank look silent.
// The verdict (the rank silent past the timeout, in a phase where it is
// judged) waits for the loop, which wakes on wakeFd(). A rank that leaves a
// ping unanswered for a ping interval is asked whether its process is on its
// way out (RankProcess::exiting: killed, its teardown still running): then
// its end is news at once, not at the timeout.
//
// Threads: made, read and stopped by the monitor's loop; the watch's thread
// owns the link.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/file_descriptor.h"
#include "plugin/net/liveness/peer_state.h"
#include "restart/protocol/status_page.h"

namespace resilient::restart::monitor {

class LivenessWatch {
 public:
  // `fd`: the monitor's end of the link (owned). `page`: the rank's status
  // page (done or failed: no longer judged), outlives the watch.
  // `exiting`: whether the rank's process is on its way out (called on the
  // watch's thread, only while a ping is unanswered).
  LivenessWatch(const net::liveness::Policy& policy, int fd, std::string rankText,
                const protocol::StatusPage& page, std::function<bool()> exiting);
  ~LivenessWatch();  // stops the thread
  LivenessWatch(const LivenessWatch&) = delete;
  LivenessWatch& operator=(const LivenessWatch&) = delete;

  // Readable once there is news: a verdict, or the link's end.
  int wakeFd() const noexcept { return wake_.get(); }

  struct Verdict {
    uint64_t silentNs = 0;
    std::string detail;  // the net plugin's words ("no answer to heartbeats ...")
    std::string host;    // the rank's, from its handshake ("" before it)
  };
  // The rank was silent past the timeout (once set, the thread has ended).
  std::optional<Verdict> verdict();
  // Why the link ended ("goodbye", or its death), once it has; nullopt while
  // it is up or judged.
  std::optional<std::string> ended();
  // The rank's process was found on its way out while silent (once true,
  // the thread has ended).
  bool exiting();

 private:
  void run(const net::liveness::Policy& policy, int fd, const std::string& rankText,
           const std::function<bool()>& exiting) noexcept;
  void notify() noexcept;

  const protocol::StatusPage& page_;
  FileDescriptor wake_;  // eventfd: news for the loop
  FileDescriptor stop_;  // eventfd: the destructor
  std::mutex mutex_;
  std::optional<Verdict> verdict_;
  std::optional<std::string> ended_;
  bool exiting_ = false;
  std::thread thread_;
};

}  // namespace resilient::restart::monitor
