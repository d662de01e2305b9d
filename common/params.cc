#include "common/params.h"

#include <pwd.h>
#include <strings.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <set>
#include <stdexcept>

#include "common/conf_file.h"
#include "common/log.h"

namespace resilient::config {
namespace {

constexpr std::string_view kPrefix = "NCCL_RESILIENT_";

bool equalsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && strncasecmp(a.data(), b.data(), a.size()) == 0;
}

std::optional<int64_t> parseInt(const std::string& text) {
  if (text.empty()) {
    return std::nullopt;
  }
  errno = 0;
  char* end = nullptr;
  const long long v = strtoll(text.c_str(), &end, 0);
  if (errno != 0 || end == text.c_str() || *end != '\0') {
    return std::nullopt;
  }
  return static_cast<int64_t>(v);
}

// "0700", "-012": strtoll(..., 0) reads them as octal, as NCCL does; a
// reader of the value may well have meant decimal.
bool readsAsOctal(std::string_view text) {
  if (!text.empty() && (text.front() == '-' || text.front() == '+')) {
    text.remove_prefix(1);
  }
  return text.size() >= 2 && text[0] == '0' && text[1] >= '0' && text[1] <= '9';
}

std::optional<int64_t> parseBool(std::string_view text) {
  for (const char* t : {"1", "true", "yes", "on"}) {
    if (equalsIgnoreCase(text, t)) {
      return 1;
    }
  }
  for (const char* f : {"0", "false", "no", "off"}) {
    if (equalsIgnoreCase(text, f)) {
      return 0;
    }
  }
  return std::nullopt;
}

std::vector<std::string_view> splitChoices(std::string_view choices) {
  std::vector<std::string_view> out;
  while (!choices.empty()) {
    const size_t bar = choices.find('|');
    out.push_back(choices.substr(0, bar));
    if (bar == std::string_view::npos) {
      break;
    }
    choices.remove_prefix(bar + 1);
  }
  return out;
}

// The number a valid value stands for, or nullopt when `text` is not accepted.
std::optional<int64_t> parseValue(const ParamSpec& spec, const std::string& text) {
  switch (spec.type) {
    case ParamType::kBool: return parseBool(text);
    case ParamType::kInt: {
      auto v = parseInt(text);
      if (!v || *v < spec.min || *v > spec.max) {
        return std::nullopt;
      }
      return v;
    }
    case ParamType::kEnum: {
      const auto names = splitChoices(spec.choices);
      for (size_t i = 0; i < names.size(); ++i) {
        if (equalsIgnoreCase(text, names[i])) {
          return static_cast<int64_t>(i);
        }
      }
      return std::nullopt;
    }
    case ParamType::kString:
      if (spec.validate != nullptr && !spec.validate(text)) {
        return std::nullopt;
      }
      return 0;
  }
  return std::nullopt;
}

// Canonical text of a valid value (enum names in their registry spelling).
std::string canonicalText(const ParamSpec& spec, const std::string& text, int64_t number) {
  if (spec.type == ParamType::kEnum) {
    return std::string(splitChoices(spec.choices).at(static_cast<size_t>(number)));
  }
  return text;
}

size_t editDistance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) {
    row[j] = j;
  }
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::string unknownNameWarning(std::span<const ParamSpec> specs, const std::string& name,
                               const std::string& value, const std::string& origin) {
  std::string msg =
      "unknown variable " + log::printable(name) + "=\"" + log::printable(value) + "\" (from " +
      origin + ") is ignored";
  const ParamSpec* best = nullptr;
  size_t bestDistance = 4;  // suggest only close matches
  for (const ParamSpec& s : specs) {
    const size_t d = editDistance(name, s.name);
    if (d < bestDistance) {
      bestDistance = d;
      best = &s;
    }
  }
  if (best != nullptr) {
    msg += "; did you mean " + std::string(best->name) + "?";
  } else {
    msg += "; `resilient-config --list` shows the known ones";
  }
  return msg;
}

std::string homeDirectory() {
  std::vector<char> buf(16384);
  passwd pw{};
  passwd* result = nullptr;
  if (getpwuid_r(getuid(), &pw, buf.data(), buf.size(), &result) == 0 && result != nullptr &&
      result->pw_dir != nullptr) {
    return result->pw_dir;
  }
  return {};
}

void addConfLayer(ConfigSources& sources, const std::string& path, bool mustExist) {
  std::optional<ConfFile> file = readConf(path);
  if (!file) {
    if (mustExist) {
      sources.diagnostics.push_back("NCCL_CONF_FILE=" + path + ": no such file");
    }
    return;
  }
  sources.diagnostics.insert(sources.diagnostics.end(), file->diagnostics.begin(),
                             file->diagnostics.end());
  ConfigLayer layer;
  layer.origin = file->path;
  for (ConfEntry& e : file->entries) {
    layer.values.emplace_back(std::move(e.name), std::move(e.value));
  }
  sources.layers.push_back(std::move(layer));
}

}  // namespace

const std::string* ConfigLayer::find(std::string_view name) const {
  for (const auto& [n, v] : values) {
    if (n == name) {
      return &v;
    }
  }
  return nullptr;
}

ConfigSources ConfigSources::fromEnvironment(const char* const* envp, const std::string& homeDir,
                                             const std::string& systemConfPath) {
  ConfigSources sources;
  ConfigLayer env;
  env.origin = "environment";
  for (const char* const* p = envp; p != nullptr && *p != nullptr; ++p) {
    std::string_view entry(*p);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || entry.substr(0, 5) != "NCCL_") {
      continue;  // only NCCL's namespace concerns us
    }
    env.values.emplace_back(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  const std::string* confFile = env.find("NCCL_CONF_FILE");
  const bool explicitFile = confFile != nullptr && !confFile->empty();
  const std::string userPath =
      explicitFile ? *confFile : (homeDir.empty() ? std::string() : homeDir + "/.nccl.conf");
  sources.layers.push_back(std::move(env));
  if (!userPath.empty()) {
    addConfLayer(sources, userPath, explicitFile);
  }
  addConfLayer(sources, systemConfPath, false);
  return sources;
}

ConfigSources ConfigSources::fromProcess() {
  return fromEnvironment(environ, homeDirectory(), "/etc/nccl.conf");
}

Params::Params(std::span<const ParamSpec> specs, const ConfigSources& sources)
    : specs_(specs), values_(specs.size()), warnings_(sources.diagnostics) {
  auto lookup = [&](std::string_view name) -> std::pair<const std::string*, const std::string*> {
    for (const ConfigLayer& layer : sources.layers) {
      if (const std::string* v = layer.find(name)) {
        return {v, &layer.origin};
      }
    }
    return {nullptr, nullptr};
  };

  for (size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& spec = specs[i];
    ParamValue& out = values_[i];
    auto useDefault = [&] {
      const std::string def = spec.defaultValue;
      const auto n = parseValue(spec, def);
      if (!n) {
        warnings_.push_back("internal: the default \"" + def + "\" of " + spec.name +
                            " is not accepted by its own type");
      }
      out = ParamValue{canonicalText(spec, def, n.value_or(0)), n.value_or(0), "default"};
    };
    auto tryValue = [&](const char* variable, const std::string& text, const std::string& origin) {
      if (const auto n = parseValue(spec, text)) {
        out = ParamValue{canonicalText(spec, text, *n), *n, origin};
        if (spec.type == ParamType::kInt && readsAsOctal(text)) {
          warnings_.push_back(std::string(variable) + "=" + log::printable(text) + " (from " +
                              origin + ") is read as octal, " + std::to_string(*n) +
                              ", as NCCL reads it; without the leading 0 it is decimal");
        }
        return;
      }
      useDefault();
      std::string w = variable;
      w += "=\"" + log::printable(text) + "\" (from " + origin + ") is not valid: expected ";
      w += describeAccepted(spec);
      w += "; using the default " + out.text;
      warnings_.push_back(std::move(w));
    };

    const auto [own, ownOrigin] = lookup(spec.name);
    const auto [inherited, inheritedOrigin] =
        spec.inherits != nullptr ? lookup(spec.inherits) : decltype(lookup("")){};
    if (own != nullptr) {
      tryValue(spec.name, *own, *ownOrigin);
    } else if (inherited != nullptr) {
      tryValue(spec.inherits, *inherited,
               std::string(spec.inherits) + " (" + *inheritedOrigin + ")");
    } else {
      useDefault();
    }
  }

  std::set<std::string, std::less<>> reported;
  for (const ConfigLayer& layer : sources.layers) {
    for (const auto& entry : layer.values) {
      const std::string& name = entry.first;
      if (name.compare(0, kPrefix.size(), kPrefix) != 0 || reported.count(name) != 0) {
        continue;
      }
      const bool known = std::any_of(specs.begin(), specs.end(),
                                     [&](const ParamSpec& s) { return name == s.name; });
      if (!known) {
        reported.insert(name);
        warnings_.push_back(unknownNameWarning(specs, name, entry.second, layer.origin));
      }
    }
  }
}

const ParamValue& Params::registryValue(size_t index, const ParamSpec& spec) const {
  if (index >= specs_.size() || std::string_view(specs_[index].name) != spec.name) {
    throw std::logic_error(std::string("Params::get: ") + spec.name +
                           " is not where the registry puts it (Params not from registry())");
  }
  return values_[index];
}

const Params& Params::global() {
  static const Params instance = [] {
    Params p(registry(), ConfigSources::fromProcess());
    const unsigned long mask = log::parseSubsystems(p.get<kLogSubsys>()).value_or(~0ul);
    log::configure(p.get<kLogLevel>(), mask);
    log::setWarnIntervalMs(p.get<kWarnIntervalMs>());
    for (const std::string& w : p.warnings()) {
      RES_WARN(NCCL_ENV, "%s", w.c_str());
    }
    for (size_t i = 0; i < p.specs().size(); ++i) {
      if (p.value(i).origin != "default") {
        RES_INFO(NCCL_ENV, "%s=%s (from %s)", p.specs()[i].name, p.value(i).text.c_str(),
                 p.value(i).origin.c_str());
      }
    }
    return p;
  }();
  return instance;
}

std::string describeAccepted(const ParamSpec& spec) {
  switch (spec.type) {
    case ParamType::kBool: return "a boolean (1/0, true/false, yes/no, on/off)";
    case ParamType::kInt: {
      std::string s =
          "an integer in [" + std::to_string(spec.min) + ", " + std::to_string(spec.max) + "]";
      if (spec.unit[0] != '\0') {
        s += std::string(" ") + spec.unit;
      }
      return s;
    }
    case ParamType::kEnum: {
      std::string s = "one of ";
      const auto names = splitChoices(spec.choices);
      for (size_t i = 0; i < names.size(); ++i) {
        s += (i == 0 ? "" : ", ") + std::string(names[i]);
      }
      return s;
    }
    case ParamType::kString:
      return spec.validate != nullptr ? std::string(spec.accepted) : std::string("any text");
  }
  return "?";
}

}  // namespace resilient::config
