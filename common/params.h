// Resolution of the knobs in the registry, NCCL's order: the process
// environment first, then NCCL_CONF_FILE (or ~/.nccl.conf when it is unset),
// then /etc/nccl.conf. A knob with an `inherits` variable (e.g. LOG_LEVEL and
// NCCL_DEBUG) falls back to that variable, resolved the same way, and then to
// its default. Values are resolved once and immutable afterwards; the process
// environment is only read, never written.
//
// Every problem (unknown NCCL_RESILIENT_* name, bad value, malformed conf-file
// line) produces exactly one warning that names the variable, the value, where
// it came from and what is accepted; the default is then used.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "common/knobs.h"
#include "common/param_registry.h"

namespace resilient::config {

// One source of NAME=VALUE pairs, e.g. the environment or one conf file.
struct ConfigLayer {
  std::string origin;  // "environment" or the file's path
  std::vector<std::pair<std::string, std::string>> values;

  const std::string* find(std::string_view name) const;
};

// The layers, highest precedence first, and the diagnostics of reading them.
struct ConfigSources {
  std::vector<ConfigLayer> layers;
  std::vector<std::string> diagnostics;

  // The real process: environ, NCCL_CONF_FILE or ~/.nccl.conf, /etc/nccl.conf.
  static ConfigSources fromProcess();
  // The same from an explicit envp (NULL-terminated), home directory and system
  // file path (tests use these).
  static ConfigSources fromEnvironment(const char* const* envp, const std::string& homeDir,
                                       const std::string& systemConfPath);
};

struct ParamValue {
  std::string text;    // effective value as text
  int64_t number = 0;  // kInt value, kBool 0/1, kEnum index
  std::string origin;  // "default", "environment", a file path, or "NCCL_DEBUG (environment)"
};

class Params {
 public:
  // Resolves `specs` against `sources`. Nothing is logged here; see warnings().
  Params(std::span<const ParamSpec> specs, const ConfigSources& sources);

  // Resolved once per process (thread-safe), then immutable. The first call
  // applies the logging knobs and logs each warning once.
  static const Params& global();

  const std::vector<std::string>& warnings() const noexcept { return warnings_; }
  std::span<const ParamSpec> specs() const noexcept { return specs_; }

  // The value of the index-th spec.
  const ParamValue& value(size_t index) const { return values_.at(index); }

  // The value of `K`, a knob of kAllKnobs (knobs.h), as its type: int64_t,
  // bool, const std::string& or its enum. These Params must have been resolved
  // from registry(), as global() is.
  template <const auto& K>
  typename std::remove_cvref_t<decltype(K)>::Read get() const {
    using T = typename std::remove_cvref_t<decltype(K)>::Value;
    constexpr size_t kIndex = knobIndex(K.spec());
    static_assert(kIndex < kAllKnobs.size(), "the knob is missing from kAllKnobs (common/knobs.h)");
    const ParamValue& v = registryValue(kIndex, K.spec());
    if constexpr (std::is_same_v<T, std::string>) {
      return v.text;
    } else if constexpr (std::is_same_v<T, bool>) {
      return v.number != 0;
    } else {
      return static_cast<T>(v.number);
    }
  }

 private:
  // value(index), after checking that these Params hold `spec` there.
  const ParamValue& registryValue(size_t index, const ParamSpec& spec) const;

  std::span<const ParamSpec> specs_;
  std::vector<ParamValue> values_;
  std::vector<std::string> warnings_;
};

// "integer in [0, 3600000] ms", "one of NONE, WARN, INFO", ... for docs and warnings.
std::string describeAccepted(const ParamSpec& spec);

}  // namespace resilient::config
