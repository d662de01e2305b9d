// resilient-config: shows the NCCL_RESILIENT_* knobs in effect for this
// environment (value and where it came from), lists the known knobs, or
// prints docs/configuration.md.
#include <cstdio>
#include <exception>

#include <CLI/CLI.hpp>

#include "common/param_doc.h"
#include "common/params.h"

using resilient::config::Params;

namespace {

int run(int argc, char** argv) {
  CLI::App app{
      "Shows the NCCL_RESILIENT_* configuration in effect and where each value came from."};
  bool markdown = false;
  bool list = false;
  app.add_flag("--markdown", markdown, "print the configuration reference (docs/configuration.md)");
  app.add_flag("--list", list, "print the known knobs, one per line");
  CLI11_PARSE(app, argc, argv);

  const auto specs = resilient::config::registry();
  if (markdown) {
    std::fputs(resilient::config::renderConfigurationMarkdown(specs).c_str(), stdout);
    return 0;
  }
  if (list) {
    for (const auto& spec : specs) {
      std::printf("%s\t%s\n", spec.name, spec.doc);
    }
    return 0;
  }
  // Resolving logs each warning once, on stderr.
  const Params& params = Params::global();
  for (size_t i = 0; i < specs.size(); ++i) {
    std::printf("%s=%s\t(%s)\n", specs[i].name, params.value(i).text.c_str(),
                params.value(i).origin.c_str());
  }
  return params.warnings().empty() ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "resilient-config: %s\n", e.what());
    return 2;
  }
}
