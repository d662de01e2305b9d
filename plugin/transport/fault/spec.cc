#include "plugin/transport/fault/spec.h"

#include <array>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <system_error>
#include <utility>

namespace resilient::transport::fault {
namespace {

constexpr std::string_view kAcceptedKeys =
    "kind, op, dir, after, at, peer, duration, delay, rate, prob, seed, error";
constexpr double kMaxRate = 1e15;  // bytes per second

std::string_view trim(std::string_view s) {
  constexpr std::string_view kSpace = " \t\r\n";
  const size_t first = s.find_first_not_of(kSpace);
  if (first == std::string_view::npos) {
    return {};
  }
  const size_t last = s.find_last_not_of(kSpace);
  return s.substr(first, last - first + 1);
}

// Splits `s` at `sep`; the pieces are views into `s`.
std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string_view::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

template <class E, size_t N>
std::optional<E> lookup(const std::array<std::pair<std::string_view, E>, N>& table,
                        std::string_view name) {
  for (const auto& [text, value] : table) {
    if (text == name) {
      return value;
    }
  }
  return std::nullopt;
}

template <class E, size_t N>
std::string names(const std::array<std::pair<std::string_view, E>, N>& table) {
  std::string out;
  for (const auto& entry : table) {
    if (!out.empty()) {
      out += ", ";
    }
    out += entry.first;
  }
  return out;
}

constexpr std::array<std::pair<std::string_view, FaultKind>, 6> kKinds{{
    {"stall", FaultKind::kStall},
    {"error", FaultKind::kError},
    {"close", FaultKind::kClose},
    {"delay", FaultKind::kDelay},
    {"slow", FaultKind::kSlow},
    {"nosizes", FaultKind::kNoSizes},
}};
constexpr std::array<std::pair<std::string_view, FaultOp>, 6> kOps{{
    {"isend", FaultOp::kIsend},
    {"irecv", FaultOp::kIrecv},
    {"test", FaultOp::kTest},
    {"connect", FaultOp::kConnect},
    {"accept", FaultOp::kAccept},
    {"any", FaultOp::kAny},
}};
constexpr std::array<std::pair<std::string_view, FaultDir>, 3> kDirs{{
    {"send", FaultDir::kSend},
    {"recv", FaultDir::kRecv},
    {"any", FaultDir::kAny},
}};
constexpr std::array<std::pair<std::string_view, InjectedError>, 2> kErrors{{
    {"remote", InjectedError::kRemote},
    {"system", InjectedError::kSystem},
}};

std::optional<uint64_t> parseUnsigned(std::string_view text) {
  uint64_t value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (text.empty() || ec != std::errc() || ptr != end) {
    return std::nullopt;
  }
  return value;
}

std::optional<double> parseDouble(std::string_view text) {
  double value = 0;
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value, std::chars_format::general);
  if (text.empty() || ec != std::errc() || ptr != end || !std::isfinite(value)) {
    return std::nullopt;
  }
  return value;
}

// "1.5G" → 1500000000. Decimal suffixes, as network rates are written.
std::optional<uint64_t> parseRate(std::string_view text) {
  double scale = 1;
  if (!text.empty()) {
    switch (text.back()) {
      case 'k':
      case 'K': scale = 1e3; break;
      case 'M': scale = 1e6; break;
      case 'G': scale = 1e9; break;
      default: break;
    }
  }
  if (scale != 1) {
    text.remove_suffix(1);
  }
  const std::optional<double> number = parseDouble(text);
  if (!number) {
    return std::nullopt;
  }
  const double rate = std::round(*number * scale);
  if (rate < 1 || rate > kMaxRate) {
    return std::nullopt;
  }
  return static_cast<uint64_t>(rate);
}

// Errors of one rule, naming it.
class RuleError {
 public:
  explicit RuleError(std::string_view text) : text_(text) {}
  Status operator()(const std::string& what) const {
    return invalidUsage("fault spec: rule '" + std::string(text_) + "': " + what);
  }

 private:
  std::string_view text_;
};

// A rule as its keys gave it, with which keys came (for the checks across keys).
struct ParsedRule {
  FaultRule rule;
  bool hasKind = false;
  bool hasAfter = false;
  bool hasDelay = false;
  bool hasRate = false;
  bool hasProb = false;
  bool hasSeed = false;
  bool hasError = false;
};

Status parseNumber(const RuleError& fail, std::string_view key, std::string_view value,
                   uint64_t maxValue, uint64_t* out) {
  const std::optional<uint64_t> v = parseUnsigned(value);
  if (!v || *v > maxValue) {
    return fail("bad number '" + std::string(value) + "' for " + std::string(key) +
                "; accepted: an integer in [0, " + std::to_string(maxValue) + "]");
  }
  *out = *v;
  return {};
}

Status parseMilliseconds(const RuleError& fail, std::string_view key, std::string_view value,
                         uint64_t minValue, uint64_t* out) {
  const std::optional<uint64_t> v = parseUnsigned(value);
  if (!v || *v < minValue || *v > kMaxFaultMs) {
    return fail("bad number '" + std::string(value) + "' for " + std::string(key) +
                "; accepted: milliseconds, an integer in [" + std::to_string(minValue) + ", " +
                std::to_string(kMaxFaultMs) + "]");
  }
  *out = *v;
  return {};
}

// One of a table's names.
template <class E, size_t N>
Status parseName(const RuleError& fail, std::string_view key,
                 const std::array<std::pair<std::string_view, E>, N>& table,
                 std::string_view value, E* out) {
  const std::optional<E> e = lookup(table, value);
  if (!e) {
    return fail("unknown " + std::string(key) + " '" + std::string(value) +
                "'; accepted: " + names(table));
  }
  *out = *e;
  return {};
}

// The keys that describe the rule's values (kind, op, dir and the numbers).
Status applyValueKey(ParsedRule& p, std::string_view key, std::string_view value,
                     const RuleError& fail) {
  FaultRule& rule = p.rule;
  if (key == "rate") {
    const std::optional<uint64_t> rate = parseRate(value);
    if (!rate) {
      return fail("bad rate '" + std::string(value) +
                  "'; accepted: bytes per second in [1, 1e15], optionally with a k, M or G "
                  "suffix (powers of 1000), e.g. rate=100M");
    }
    rule.rateBytesPerS = *rate;
    p.hasRate = true;
  } else if (key == "prob") {
    const std::optional<double> v = parseDouble(value);
    if (!v || *v < 0 || *v > 1) {
      return fail("bad probability '" + std::string(value) + "'; accepted: a number in [0, 1]");
    }
    rule.prob = *v;
    p.hasProb = true;
  } else if (key == "seed") {
    RESILIENT_TRY(parseNumber(fail, key, value, std::numeric_limits<uint64_t>::max(), &rule.seed));
    p.hasSeed = true;
  } else if (key == "error") {
    RESILIENT_TRY(parseName(fail, key, kErrors, value, &rule.error));
    p.hasError = true;
  } else {
    return fail("unknown key '" + std::string(key) +
                "'; accepted keys: " + std::string(kAcceptedKeys));
  }
  return {};
}

// One key=value of a rule into `p`.
Status applyKey(ParsedRule& p, std::string_view key, std::string_view value,
                const RuleError& fail) {
  FaultRule& rule = p.rule;
  if (key == "kind") {
    RESILIENT_TRY(parseName(fail, key, kKinds, value, &rule.kind));
    p.hasKind = true;
  } else if (key == "op") {
    RESILIENT_TRY(parseName(fail, key, kOps, value, &rule.op));
  } else if (key == "dir") {
    RESILIENT_TRY(parseName(fail, key, kDirs, value, &rule.dir));
  } else if (key == "after") {
    RESILIENT_TRY(parseNumber(fail, key, value, std::numeric_limits<uint64_t>::max(), &rule.after));
    p.hasAfter = true;
  } else if (key == "at") {
    RESILIENT_TRY(parseMilliseconds(fail, key, value, 0, &rule.atMs));
    rule.hasAt = true;
  } else if (key == "peer") {
    if (value.empty()) {
      return fail(
          "empty value for peer; accepted: a substring of the peer address, e.g. "
          "peer=10.0.0.2");
    }
    rule.peer = std::string(value);
  } else if (key == "duration") {
    RESILIENT_TRY(parseMilliseconds(fail, key, value, 0, &rule.durationMs));
  } else if (key == "delay") {
    RESILIENT_TRY(parseMilliseconds(fail, key, value, 1, &rule.delayMs));
    p.hasDelay = true;
  } else {
    return applyValueKey(p, key, value, fail);
  }
  return {};
}

// The checks across keys: what a kind needs, what applies to it only.
Status checkRule(const ParsedRule& p, const RuleError& fail) {
  const FaultRule& rule = p.rule;
  if (!p.hasKind) {
    return fail("missing kind; accepted: kind=" + names(kKinds));
  }
  const std::string kindName = faultKindName(rule.kind);
  if (p.hasAfter && rule.hasAt) {
    return fail("after and at both given; use one: after=N (calls) or at=MS (time)");
  }
  if (p.hasRate != (rule.kind == FaultKind::kSlow)) {
    return fail(p.hasRate ? "rate applies only to kind=slow"
                          : "kind=slow needs rate=BYTES_PER_S (k, M, G suffixes accepted)");
  }
  if (p.hasDelay != (rule.kind == FaultKind::kDelay)) {
    return fail(p.hasDelay ? "delay applies only to kind=delay" : "kind=delay needs delay=MS");
  }
  if (p.hasError && rule.kind != FaultKind::kError) {
    return fail("error applies only to kind=error");
  }
  if (p.hasSeed && !p.hasProb) {
    return fail("seed applies only together with prob");
  }
  if ((rule.kind == FaultKind::kDelay || rule.kind == FaultKind::kSlow ||
       rule.kind == FaultKind::kNoSizes) &&
      rule.op != FaultOp::kAny && rule.op != FaultOp::kIsend && rule.op != FaultOp::kIrecv) {
    return fail("kind=" + kindName + " acts on requests; accepted ops: isend, irecv, any");
  }
  const bool sendOnly = rule.op == FaultOp::kIsend || rule.op == FaultOp::kConnect;
  const bool recvOnly = rule.op == FaultOp::kIrecv || rule.op == FaultOp::kAccept;
  if ((sendOnly && rule.dir == FaultDir::kRecv) || (recvOnly && rule.dir == FaultDir::kSend)) {
    return fail(std::string("op=") + faultOpName(rule.op) + " and dir=" + faultDirName(rule.dir) +
                " conflict: " + faultOpName(rule.op) + " happens only on " +
                (sendOnly ? "send" : "receive") + " comms");
  }
  return {};
}

// Parses one rule; `text` is trimmed and not empty.
Result<FaultRule> parseRule(std::string_view text) {
  const RuleError fail(text);
  ParsedRule parsed;
  std::vector<std::string_view> seen;
  for (std::string_view item : split(text, ',')) {
    item = trim(item);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      return fail("'" + std::string(item) +
                  "' is not key=value; accepted keys: " + std::string(kAcceptedKeys));
    }
    const std::string_view key = trim(item.substr(0, eq));
    for (std::string_view k : seen) {
      if (k == key) {
        return fail("key '" + std::string(key) + "' given twice");
      }
    }
    seen.push_back(key);
    RESILIENT_TRY(applyKey(parsed, key, trim(item.substr(eq + 1)), fail));
  }
  RESILIENT_TRY(checkRule(parsed, fail));
  return parsed.rule;
}

void appendKey(std::string* out, const char* key, std::string_view value) {
  *out += ',';
  *out += key;
  *out += '=';
  *out += value;
}

std::string formatDouble(double value) {
  std::array<char, 32> buf{};
  const auto [ptr, ec] = std::to_chars(buf.data(), buf.data() + buf.size(), value);
  if (ec != std::errc()) {
    return "?";
  }
  return std::string(buf.data(), ptr);
}

}  // namespace

const char* faultKindName(FaultKind kind) noexcept {
  switch (kind) {
    case FaultKind::kStall: return "stall";
    case FaultKind::kError: return "error";
    case FaultKind::kClose: return "close";
    case FaultKind::kDelay: return "delay";
    case FaultKind::kSlow: return "slow";
    case FaultKind::kNoSizes: return "nosizes";
  }
  return "?";
}

const char* faultOpName(FaultOp op) noexcept {
  switch (op) {
    case FaultOp::kAny: return "any";
    case FaultOp::kIsend: return "isend";
    case FaultOp::kIrecv: return "irecv";
    case FaultOp::kTest: return "test";
    case FaultOp::kConnect: return "connect";
    case FaultOp::kAccept: return "accept";
  }
  return "?";
}

const char* faultDirName(FaultDir dir) noexcept {
  switch (dir) {
    case FaultDir::kAny: return "any";
    case FaultDir::kSend: return "send";
    case FaultDir::kRecv: return "recv";
  }
  return "?";
}

Result<std::vector<FaultRule>> parseFaultSpec(std::string_view spec) {
  std::vector<FaultRule> rules;
  for (std::string_view text : split(spec, ';')) {
    text = trim(text);
    if (text.empty()) {
      continue;
    }
    Result<FaultRule> rule = parseRule(text);
    if (!rule.ok()) {
      return rule.status();
    }
    if (rules.size() == kMaxFaultRules) {
      return invalidUsage("fault spec: more than " + std::to_string(kMaxFaultRules) +
                          " rules; accepted: at most " + std::to_string(kMaxFaultRules));
    }
    rules.push_back(std::move(rule).value());
  }
  return rules;
}

std::string describe(const FaultRule& rule) {
  std::string out = "kind=";
  out += faultKindName(rule.kind);
  if (rule.op != FaultOp::kAny) {
    appendKey(&out, "op", faultOpName(rule.op));
  }
  if (rule.dir != FaultDir::kAny) {
    appendKey(&out, "dir", faultDirName(rule.dir));
  }
  if (rule.hasAt) {
    appendKey(&out, "at", std::to_string(rule.atMs));
  } else if (rule.after != 0) {
    appendKey(&out, "after", std::to_string(rule.after));
  }
  if (!rule.peer.empty()) {
    appendKey(&out, "peer", rule.peer);
  }
  if (rule.durationMs != 0) {
    appendKey(&out, "duration", std::to_string(rule.durationMs));
  }
  if (rule.kind == FaultKind::kDelay) {
    appendKey(&out, "delay", std::to_string(rule.delayMs));
  }
  if (rule.kind == FaultKind::kSlow) {
    appendKey(&out, "rate", std::to_string(rule.rateBytesPerS));
  }
  if (rule.prob != 1.0 || rule.seed != 0) {
    appendKey(&out, "prob", formatDouble(rule.prob));
  }
  if (rule.seed != 0) {
    appendKey(&out, "seed", std::to_string(rule.seed));
  }
  if (rule.kind == FaultKind::kError && rule.error != InjectedError::kRemote) {
    appendKey(&out, "error", "system");
  }
  return out;
}

}  // namespace resilient::transport::fault
