// The JSON bodies of etcd's v3 KV and lease API as its gateway takes them
// (keys and values in base64, int64 as strings), and readers for the
// answers. etcd's API reference: api/etcdserverpb/rpc.proto.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

namespace resilient::store::etcd::kv {

using Json = nlohmann::json;

// The gateway's paths.
inline constexpr const char* kRangePath = "/v3/kv/range";
inline constexpr const char* kPutPath = "/v3/kv/put";
inline constexpr const char* kTxnPath = "/v3/kv/txn";
inline constexpr const char* kDeleteRangePath = "/v3/kv/deleterange";
inline constexpr const char* kLeaseGrantPath = "/v3/lease/grant";
inline constexpr const char* kLeaseRevokePath = "/v3/lease/revoke";
inline constexpr const char* kWatchPath = "/v3/watch";

// The range_end that selects every key starting with `prefix`.
std::string prefixEnd(std::string_view prefix);

struct RangeOptions {
  std::string rangeEnd;  // empty: the single key
  bool countOnly = false;
  bool keysOnly = false;
  int64_t revision = 0;  // 0: the latest
};

Json put(std::string_view key, std::string_view value, int64_t lease = 0, bool prevKv = false);
Json range(std::string_view key, const RangeOptions& options = {});
Json deleteRange(std::string_view key, std::string_view rangeEnd = {});
Json leaseGrant(int64_t ttlSeconds);

// Operations and conditions of a transaction.
Json opPut(const Json& put);
Json opRange(const Json& range);
Json opDelete(const Json& deleteRange);
enum class Cmp { kEqual, kGreater, kLess, kNotEqual };
Json compareVersion(std::string_view key, Cmp cmp, int64_t version);
Json compareMod(std::string_view key, Cmp cmp, int64_t modRevision);
Json compareValue(std::string_view key, Cmp cmp, std::string_view value);
Json txn(Json compares, Json success, Json failure = Json::array());

struct KeyValue {
  std::string key;
  std::string value;
  int64_t createRevision = 0;
  int64_t modRevision = 0;
  int64_t version = 0;
};

// The kvs of a range answer (decoded), its count, the header's revision.
std::vector<KeyValue> kvs(const Json& rangeAnswer);
int64_t count(const Json& rangeAnswer);
int64_t revision(const Json& answer);
// A transaction's outcome and the answer of its i-th operation
// (response_range / response_put / response_delete_range).
bool succeeded(const Json& txnAnswer);
const Json& txnResponse(const Json& txnAnswer, size_t i);

}  // namespace resilient::store::etcd::kv
