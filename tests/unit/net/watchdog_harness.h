// What the net unit tests need to drive the liveness and progress logic the
// way the watchdog thread does, without its thread, sockets or sleeps: a
// FaultSink that records what it gets and publishes the fault on the
// connection as Core does (so a connection fails once), and connections with
// requests posted and completed by hand.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/clock.h"
#include "plugin/net/connection.h"
#include "plugin/net/fault_sink.h"
#include "plugin/net/liveness/peer_link.h"

namespace resilient::test {

class RecordingSink final : public net::FaultSink {
 public:
  struct Report {
    net::ConnectionRecord* conn = nullptr;
    net::Fault fault;
    std::string peer;  // liveness::describePeer at the time of the report, as Core's WARN names it
    uint64_t atNs = 0;
  };

  // `clock` (may be null): stamps each report with its time.
  explicit RecordingSink(const Clock* clock = nullptr) : clock_(clock) {}

  void report(net::ConnectionRecord& conn, const net::Fault& fault) override {
    reports.push_back(
        {&conn, fault, net::liveness::describePeer(conn), clock_ ? clock_->monoNs() : 0});
    if (conn.claimFault()) {
      auto record = std::make_unique<net::FaultRecord>();
      record->cls = fault.cls;
      record->text = fault.detail;
      conn.publishFault(std::move(record));
    }
  }

  std::vector<Report> reports;

 private:
  const Clock* clock_;
};

// A connection whose requests the test posts and completes.
class TestConnection {
 public:
  explicit TestConnection(const char* peerText = "", net::ConnectionRecord::Direction dir =
                                                         net::ConnectionRecord::Direction::kRecv)
      : conn_(make(dir)) {
    snprintf(conn_.identity.peer.text, sizeof conn_.identity.peer.text, "%s", peerText);
  }

  net::ConnectionRecord& operator*() noexcept { return conn_; }
  net::ConnectionRecord* operator->() noexcept { return &conn_; }
  net::ConnectionRecord* get() noexcept { return &conn_; }

  void post(uint64_t bytes = 64) {
    posted_.push_back(conn_.acquire());
    conn_.onPosted(bytes);
  }
  void complete(uint64_t bytes = 64) {
    conn_.onCompleted(bytes);
    conn_.release(posted_.back());
    posted_.pop_back();
  }

 private:
  // No inner comm: the tests drive the counters, nothing reaches a transport.
  static net::ConnectionRecord make(net::ConnectionRecord::Direction dir) {
    if (dir == net::ConnectionRecord::Direction::kSend) {
      return net::ConnectionRecord(0xc0ffee, std::unique_ptr<transport::SendComm>(), 8);
    }
    return net::ConnectionRecord(0xc0ffee, std::unique_ptr<transport::RecvComm>(), 8);
  }

  net::ConnectionRecord conn_;
  std::vector<net::RequestRecord*> posted_;
};

}  // namespace resilient::test
