#include "store/etcd/kv_api.h"

#include "store/errors.h"
#include "store/etcd/base64.h"
#include "store/etcd/rpc.h"

namespace resilient::store::etcd::kv {
namespace {

const char* cmpName(Cmp cmp) {
  switch (cmp) {
    case Cmp::kEqual: return "EQUAL";
    case Cmp::kGreater: return "GREATER";
    case Cmp::kLess: return "LESS";
    case Cmp::kNotEqual: return "NOT_EQUAL";
  }
  return "EQUAL";
}

std::string decoded(const Json& obj, const char* field) {
  auto it = obj.find(field);
  if (it == obj.end() || !it->is_string()) {
    return {};
  }
  std::optional<std::string> d = base64Decode(it->get<std::string>());
  if (!d) {
    throw ProtocolError(std::string("etcd answer: field '") + field + "' is not base64");
  }
  return std::move(*d);
}

const Json& emptyObject() {
  static const Json kEmpty = Json::object();
  return kEmpty;
}

}  // namespace

std::string prefixEnd(std::string_view prefix) {
  std::string end(prefix);
  while (!end.empty()) {
    if (static_cast<uint8_t>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<uint8_t>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');  // every key
}

Json put(std::string_view key, std::string_view value, int64_t lease, bool prevKv) {
  Json j = {{"key", base64Encode(key)}, {"value", base64Encode(value)}};
  if (lease != 0) {
    j["lease"] = std::to_string(lease);
  }
  if (prevKv) {
    j["prev_kv"] = true;
  }
  return j;
}

Json range(std::string_view key, const RangeOptions& options) {
  Json j = {{"key", base64Encode(key)}};
  if (!options.rangeEnd.empty()) {
    j["range_end"] = base64Encode(options.rangeEnd);
  }
  if (options.countOnly) {
    j["count_only"] = true;
  }
  if (options.keysOnly) {
    j["keys_only"] = true;
  }
  if (options.revision > 0) {
    j["revision"] = std::to_string(options.revision);
  }
  return j;
}

Json deleteRange(std::string_view key, std::string_view rangeEnd) {
  Json j = {{"key", base64Encode(key)}};
  if (!rangeEnd.empty()) {
    j["range_end"] = base64Encode(rangeEnd);
  }
  return j;
}

Json leaseGrant(int64_t ttlSeconds) {
  return Json{{"TTL", std::to_string(ttlSeconds)}};
}

Json opPut(const Json& p) {
  return Json{{"request_put", p}};
}
Json opRange(const Json& r) {
  return Json{{"request_range", r}};
}
Json opDelete(const Json& d) {
  return Json{{"request_delete_range", d}};
}

Json compareVersion(std::string_view key, Cmp cmp, int64_t version) {
  return Json{{"key", base64Encode(key)},
              {"target", "VERSION"},
              {"result", cmpName(cmp)},
              {"version", std::to_string(version)}};
}

Json compareMod(std::string_view key, Cmp cmp, int64_t modRevision) {
  return Json{{"key", base64Encode(key)},
              {"target", "MOD"},
              {"result", cmpName(cmp)},
              {"mod_revision", std::to_string(modRevision)}};
}

Json compareValue(std::string_view key, Cmp cmp, std::string_view value) {
  return Json{{"key", base64Encode(key)},
              {"target", "VALUE"},
              {"result", cmpName(cmp)},
              {"value", base64Encode(value)}};
}

Json txn(Json compares, Json success, Json failure) {
  return Json{{"compare", std::move(compares)},
              {"success", std::move(success)},
              {"failure", std::move(failure)}};
}

std::vector<KeyValue> kvs(const Json& rangeAnswer) {
  std::vector<KeyValue> out;
  auto it = rangeAnswer.find("kvs");
  if (it == rangeAnswer.end() || !it->is_array()) {
    return out;
  }
  for (const Json& kv : *it) {
    KeyValue v;
    v.key = decoded(kv, "key");
    v.value = decoded(kv, "value");
    v.createRevision = jsonInt(kv, "create_revision");
    v.modRevision = jsonInt(kv, "mod_revision");
    v.version = jsonInt(kv, "version");
    out.push_back(std::move(v));
  }
  return out;
}

int64_t count(const Json& rangeAnswer) {
  return jsonInt(rangeAnswer, "count");
}

int64_t revision(const Json& answer) {
  auto it = answer.find("header");
  return it == answer.end() ? 0 : jsonInt(*it, "revision");
}

bool succeeded(const Json& txnAnswer) {
  return txnAnswer.value("succeeded", false);
}

const Json& txnResponse(const Json& txnAnswer, size_t i) {
  auto it = txnAnswer.find("responses");
  if (it == txnAnswer.end() || !it->is_array() || i >= it->size()) {
    return emptyObject();
  }
  const Json& r = (*it)[i];
  for (const char* field : {"response_range", "response_put", "response_delete_range"}) {
    auto f = r.find(field);
    if (f != r.end()) {
      return *f;
    }
  }
  return emptyObject();
}

}  // namespace resilient::store::etcd::kv
