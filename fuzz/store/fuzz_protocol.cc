// libFuzzer target for the TCP store's protocol parser and request handling
// (fuzz/store/run_fuzz.sh builds it with clang -fsanitize=fuzzer).
//
// The first input byte picks what is fed the rest:
//   0-3  a server session: the bytes arrive in pieces (sizes taken from the
//        input) at a FrameDecoder, then Hello and frames go through the
//        RequestHandler and a StoreEngine, as the epoll server does it;
//        pending waits and barriers are then expired and the owner dropped
//   4    a client: replies decoded as TcpStoreClient's reader does
//   5    a HelloReply
// Malformed input must end in ProtocolError (the server drops the peer) or
// InvalidArgument (a reply); anything else escaping is a bug.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "store/engine.h"
#include "store/errors.h"
#include "store/tcp/frame_decoder.h"
#include "store/tcp/protocol.h"
#include "store/tcp/request_handler.h"

namespace {

using namespace resilient::store;

// Small limits make the fuzzer reach the limit checks.
constexpr size_t kFuzzMaxFrame = size_t{64} * 1024;

void serverSession(std::string_view in, uint8_t mode) {
  std::vector<Completion> completions;
  StoreEngine engine([&](const Completion& c) { completions.push_back(c); });
  tcp::RequestHandler handler(engine, kFuzzMaxFrame);
  tcp::FrameDecoder decoder(kFuzzMaxFrame, tcp::FrameKind::kRequest);
  std::vector<uint64_t> pending;
  std::string out;
  bool ready = mode >= 2;  // modes 2-3 skip the handshake
  const TimePoint now = SteadyClock::now();
  size_t pos = 0;
  uint64_t conn = 1;
  try {
    while (pos < in.size()) {
      // Piece size from the input itself: 1..64 bytes.
      const size_t piece = 1 + (static_cast<uint8_t>(in[pos]) & 63);
      ++pos;
      const size_t n = std::min(piece, in.size() - pos);
      decoder.feed(in.substr(pos, n));
      pos += n;
      if (!ready) {
        std::optional<tcp::Hello> hello = decoder.nextHello();
        if (!hello) {
          continue;
        }
        ready = true;
      }
      while (std::optional<tcp::Frame> f = decoder.next()) {
        std::optional<tcp::RequestHandler::Deferred> d = handler.handle(conn, *f, now, &out);
        if (d) {
          pending.push_back(d->pendingId);
        }
        for (const Completion& c : completions) {
          handler.encodeCompletion(c, &out);
        }
        completions.clear();
        if (out.size() > (1u << 20)) {
          out.clear();
        }
      }
      if (mode == 1 && (pos & 7) == 0) {
        ++conn;  // several connections share the engine
      }
    }
  } catch (const ProtocolError&) {
    // The server drops this peer.
  }
  // Timeouts fire, the peers leave: the engine must stay consistent.
  for (uint64_t id : pending) {
    if ((id & 1) != 0) {
      engine.expire(id);
    }
  }
  for (uint64_t c = 1; c <= conn; ++c) {
    engine.dropOwner(c);
  }
  for (const Completion& c : completions) {
    handler.encodeCompletion(c, &out);
  }
  engine.expireKeys(now + std::chrono::hours(24 * 365));
  if (engine.pendingCount() != 0) {
    __builtin_trap();  // every pending call was expired or dropped
  }
}

void clientSession(std::string_view in) {
  tcp::FrameDecoder decoder(kFuzzMaxFrame, tcp::FrameKind::kReply);
  try {
    decoder.feed(in);
    while (std::optional<tcp::Frame> f = decoder.next()) {
      tcp::Response r = tcp::decodeResponse(f->header, f->payload);
      std::string again;
      tcp::encodeResponse(r, &again);  // what decodes must encode
    }
  } catch (const ProtocolError&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) {
    return 0;
  }
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  const uint8_t mode = data[0] % 6;
  if (mode <= 3) {
    serverSession(in, mode);
  } else if (mode == 4) {
    clientSession(in);
  } else {
    try {
      tcp::decodeHelloReply(in);
    } catch (const ProtocolError&) {
    }
  }
  return 0;
}
