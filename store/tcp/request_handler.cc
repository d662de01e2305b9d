#include "store/tcp/request_handler.h"

#include <algorithm>
#include <utility>

namespace resilient::store::tcp {

RequestHandler::RequestHandler(StoreEngine& engine, size_t maxFrameBytes)
    : engine_(engine), maxFrameBytes_(maxFrameBytes) {}

void RequestHandler::send(Response& resp, std::string* out) const {
  const size_t start = out->size();
  encodeResponse(resp, out);
  if (out->size() - start - kFrameHeaderBytes > maxFrameBytes_) {
    out->resize(start);
    Response tooLarge;
    tooLarge.op = resp.op;
    tooLarge.id = resp.id;
    tooLarge.status = ReplyStatus::kInvalid;
    tooLarge.message =
        "the reply would exceed the frame limit of " + std::to_string(maxFrameBytes_) + " bytes";
    encodeResponse(tooLarge, out);
  }
}

std::optional<RequestHandler::Deferred> RequestHandler::handle(uint64_t conn, const Frame& frame,
                                                               TimePoint now, std::string* out) {
  StoreRequest req = decodeRequest(frame.header, frame.payload);
  Response resp;
  resp.op = replyOpOf(req.op);
  resp.id = req.id;
  const auto timeoutOf = [&](int64_t ms) {
    return now + std::chrono::milliseconds(std::clamp<int64_t>(ms, 0, kMaxTimeoutMs));
  };
  try {
    engine_.expireKeys(now);
    switch (req.op) {
      case Op::kPing: break;
      case Op::kSet:
        checkKey(req.key);
        if (req.number < 0 || req.number > kMaxTimeoutMs) {
          throw InvalidArgument("ttl of " + std::to_string(req.number) + " ms out of range");
        }
        engine_.set(
            req.key, req.value,
            req.number > 0 ? std::optional<TimePoint>(timeoutOf(req.number)) : std::nullopt);
        break;
      case Op::kGet: {
        checkKey(req.key);
        const std::string* v = engine_.find(req.key);
        resp.value = v ? std::optional<std::string>(*v) : std::nullopt;
        break;
      }
      case Op::kAdd: {
        checkKey(req.key);
        AddOutcome r = engine_.add(req.key, req.number);
        if (!r.ok) {
          throw InvalidArgument("add on key '" + req.key +
                                "': the stored value is not a decimal int64, or the sum overflows");
        }
        resp.number = r.value;
        break;
      }
      case Op::kCompareSet: {
        checkKey(req.key);
        std::optional<std::string_view> expected;
        if (req.expected) {
          expected = *req.expected;
        }
        CasResult r = engine_.compareSet(req.key, expected, req.value);
        resp.flag = r.swapped;
        resp.value = std::move(r.current);
        break;
      }
      case Op::kMultiGet:
        for (const auto& k : req.keys) {
          checkKey(k);
        }
        resp.values.reserve(req.keys.size());
        for (const auto& k : req.keys) {
          const std::string* v = engine_.find(k);
          resp.values.push_back(v ? std::optional<std::string>(*v) : std::nullopt);
        }
        break;
      case Op::kMultiSet:
        for (const auto& [k, v] : req.pairs) {
          checkKey(k);
        }
        for (const auto& [k, v] : req.pairs) {
          engine_.set(k, v);
        }
        break;
      case Op::kRemove:
        checkKey(req.key);
        resp.flag = engine_.remove(req.key);
        break;
      case Op::kRemovePrefix:
        resp.number = static_cast<int64_t>(engine_.removePrefix(req.key));
        break;
      case Op::kCheck:
        resp.flag = true;
        for (const auto& k : req.keys) {
          checkKey(k);
          if (engine_.find(k) == nullptr) {
            resp.flag = false;
          }
        }
        break;
      case Op::kWait: {
        for (const auto& k : req.keys) {
          checkKey(k);
        }
        const uint64_t id = engine_.wait(req.keys, conn, req.id);
        if (id != 0) {
          if (req.number <= 0) {
            engine_.expire(id);  // answered through Notify, now
            return std::nullopt;
          }
          return Deferred{id, timeoutOf(req.number)};
        }
        break;
      }
      case Op::kSetExpiringMany:
        if (req.number <= 0 || req.number > kMaxTimeoutMs) {
          throw InvalidArgument("ttl of " + std::to_string(req.number) + " ms out of range");
        }
        for (const auto& [k, v] : req.pairs) {
          checkKey(k);
        }
        for (const auto& [k, v] : req.pairs) {
          engine_.set(k, v, timeoutOf(req.number));
        }
        break;
      case Op::kBarrier:
      case Op::kBarrierRanks: {
        checkBarrier(req.arrival);
        BarrierOutcome r = engine_.barrier(req.arrival, conn, req.id);
        switch (r.kind) {
          case BarrierOutcome::Kind::kDone: resp.barrier = r.result; break;
          case BarrierOutcome::Kind::kPending:
            if (req.number <= 0) {
              engine_.expire(r.pendingId);
              return std::nullopt;
            }
            return Deferred{r.pendingId, timeoutOf(req.number)};
          case BarrierOutcome::Kind::kOverflow:
            resp.status = ReplyStatus::kBarrierOverflow;
            resp.report = std::move(r.report);
            break;
          case BarrierOutcome::Kind::kMismatch: throw InvalidArgument(r.message);
          case BarrierOutcome::Kind::kStale: resp.status = ReplyStatus::kBarrierStale; break;
        }
        break;
      }
    }
  } catch (const InvalidArgument& e) {
    resp = Response{};
    resp.op = replyOpOf(req.op);
    resp.id = req.id;
    resp.status = ReplyStatus::kInvalid;
    resp.message = e.what();
  }
  send(resp, out);
  return std::nullopt;
}

void RequestHandler::encodeCompletion(const Completion& c, std::string* out) const {
  if (c.kind == Completion::Kind::kBarrierReleased) {
    encodeBarrierRelease(c.tag, c.result, out);
    return;
  }
  Response resp;
  resp.id = c.tag;
  switch (c.kind) {
    case Completion::Kind::kWaitReady: resp.op = Op::kWait; break;
    case Completion::Kind::kWaitTimeout:
      resp.op = Op::kWait;
      resp.status = ReplyStatus::kTimeout;
      resp.keys = c.missingKeys;
      break;
    case Completion::Kind::kBarrierReleased:
      resp.op = Op::kBarrier;
      resp.barrier = c.result;
      break;
    case Completion::Kind::kBarrierTimeout:
      resp.op = Op::kBarrier;
      resp.status = ReplyStatus::kTimeout;
      resp.report = c.report;
      break;
    case Completion::Kind::kDropped:
      resp.op = Op::kBarrier;
      resp.status = ReplyStatus::kBarrierDropped;
      break;
  }
  send(resp, out);
}

}  // namespace resilient::store::tcp
