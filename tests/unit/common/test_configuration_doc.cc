#include <fstream>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "common/param_doc.h"
#include "common/param_registry.h"

#ifndef RESILIENT_SOURCE_ROOT
#error "RESILIENT_SOURCE_ROOT must name the source tree"
#endif

TEST_CASE("docs/configuration.md is the registry's rendering", "[common][docs]") {
  std::ifstream in(RESILIENT_SOURCE_ROOT "/docs/configuration.md", std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream committed;
  committed << in.rdbuf();
  const std::string rendered =
      resilient::config::renderConfigurationMarkdown(resilient::config::registry());
  INFO("docs/configuration.md drifted from the registry: run `ninja -C build docs-configuration`");
  CHECK(committed.str() == rendered);
}

TEST_CASE("the rendering lists every knob with its default and range", "[common][docs]") {
  const std::string md =
      resilient::config::renderConfigurationMarkdown(resilient::config::registry());
  for (const auto& spec : resilient::config::registry()) {
    CAPTURE(spec.name);
    CHECK(md.find(std::string("| `") + spec.name + "` |") != std::string::npos);
    CHECK(md.find(std::string("`") + spec.defaultValue + "`") != std::string::npos);
  }
  CHECK(md.find("an integer in [0, 3600000] ms") != std::string::npos);
}
