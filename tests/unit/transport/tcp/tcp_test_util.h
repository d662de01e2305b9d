// Helpers of the TCP transport tests: loopback options, and raw sockets that
// talk to a listen port directly. Pairs of transports, request polling and
// round trips are tests/support/transport_pair.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "plugin/transport/tcp/options.h"
#include "plugin/transport/tcp/tcp_transport.h"
#include "plugin/transport/tcp/wire.h"

namespace resilient::test {

// Loopback ("lo"), the given family, short timeouts suited to tests.
transport::tcp::TcpOptions loopbackOptions(int family = 0);

// A blocking TCP connection to the address in a listen handle (-1 on failure).
int rawConnect(const std::byte* handle);

// Blocking send and receive of exactly `size` bytes; false on an error or EOF.
bool writeAll(int fd, const void* data, size_t size);
bool readAll(int fd, void* data, size_t size);

// "ip:port" of the local end of a socket.
std::string localAddressText(int fd);

// A hello of a connection of `nSockets` sockets, with a fresh auth nonce.
transport::tcp::Hello rawHello(uint64_t nonce, uint16_t index, uint16_t nSockets);

// The handshake of a fake connector on a raw socket, as far as it got.
struct RawHandshake {
  uint8_t hello[transport::tcp::kHelloBytes] = {};
  bool challenged = false;              // a whole challenge arrived
  transport::tcp::Challenge challenge;  // its header (version, code, pid)
  uint8_t challengeBytes[transport::tcp::kChallengeBytes] = {};
  uint8_t response[transport::tcp::kResponseBytes] = {};
  bool acked = false;  // an ack arrived
  transport::tcp::Ack ack;
};

// Plays a connector on `fd` (blocking, 5 s at most per read): sends `hello`
// (kHelloBytes), reads the challenge and, unless it refuses, answers with a
// proof made with `token` (or the kResponseBytes of `response` when not null),
// then reads the ack. Someone must poll the listener meanwhile (acceptWhile).
RawHandshake rawHandshake(int fd, const uint8_t* hello, const std::string& token,
                          const uint8_t* response = nullptr);

// Runs `client` on another thread while polling accept() on `listener`
// until it returns; the comms accept() yields are returned in *recvComm (the
// first) and counted in *comms (both may be null: any comm is then closed).
void acceptWhile(transport::Listener* listener, const std::function<void()>& client,
                 std::unique_ptr<transport::RecvComm>* recvComm = nullptr, int* comms = nullptr);

}  // namespace resilient::test
