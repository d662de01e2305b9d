#include "common/param_doc.h"

#include "common/params.h"

namespace resilient::config {
namespace {

const char* typeName(ParamType type) {
  switch (type) {
    case ParamType::kBool: return "bool";
    case ParamType::kInt: return "integer";
    case ParamType::kEnum: return "enum";
    case ParamType::kString: return "string";
  }
  return "?";
}

// Table cells must not break the row.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    out += c == '|' ? std::string("\\|") : std::string(1, c);
  }
  return out;
}

}  // namespace

std::string renderConfigurationMarkdown(std::span<const ParamSpec> specs) {
  std::string md;
  md += "# Configuration reference\n\n";
  md +=
      "<!-- Generated from common/knobs.h by `resilient-config --markdown`;\n"
      "     do not edit by hand (a unit test fails when this file and the registry differ).\n"
      "     Regenerate with `ninja -C build docs-configuration`. -->\n\n";
  md +=
      "Every knob of nccl-resilient is an `NCCL_RESILIENT_*` variable. Each is resolved once per\n"
      "process, in NCCL's order: the process environment first, then the file named by\n"
      "`NCCL_CONF_FILE` (or `~/.nccl.conf` when that is unset), then `/etc/nccl.conf`. In a conf\n"
      "file each line is `NAME=VALUE`; `#` starts a comment line, blank lines are skipped, spaces\n"
      "around the name and the value are trimmed and CRLF line ends are accepted. Where a knob\n"
      "names a fallback, the NCCL variable is used when the knob itself is unset.\n\n"
      "A bad value, or an unknown `NCCL_RESILIENT_*` name, gives one warning naming the variable,\n"
      "the value, where it came from and what is accepted; the default is then used.\n"
      "`resilient-config` prints the values in effect and where each came from.\n\n";
  md += "| Variable | Type | Default | Accepted | Fallback | Description |\n";
  md += "|---|---|---|---|---|---|\n";
  for (const ParamSpec& s : specs) {
    md += "| `" + std::string(s.name) + "` | " + typeName(s.type) + " | `" + s.defaultValue +
          "` | " + cell(describeAccepted(s)) + " | " +
          (s.inherits != nullptr ? "`" + std::string(s.inherits) + "`" : "") + " | " + cell(s.doc) +
          " |\n";
  }
  return md;
}

}  // namespace resilient::config
