#include <set>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include "common/params.h"
#include "tests/support/temp_dir.h"

using namespace resilient::config;
using resilient::test::TempDir;

namespace {

bool isEven(std::string_view s) {
  return !s.empty() && (s.back() - '0') % 2 == 0;
}

// A registry of every type, independent of the real knobs.
const ParamSpec kSpecs[] = {
    {.name = "NCCL_RESILIENT_TIMEOUT_MS",
     .type = ParamType::kInt,
     .defaultValue = "2000",
     .min = 1,
     .max = 60000,
     .unit = "ms",
     .doc = "a timeout"},
    {.name = "NCCL_RESILIENT_ENABLE",
     .type = ParamType::kBool,
     .defaultValue = "1",
     .doc = "a switch"},
    {.name = "NCCL_RESILIENT_MODE",
     .type = ParamType::kEnum,
     .defaultValue = "fast",
     .choices = "fast|safe|off",
     .doc = "a mode"},
    {.name = "NCCL_RESILIENT_LEVEL",
     .type = ParamType::kEnum,
     .defaultValue = "WARN",
     .choices = "NONE|WARN|INFO",
     .inherits = "NCCL_DEBUG",
     .doc = "inherits NCCL_DEBUG"},
    {.name = "NCCL_RESILIENT_EVEN",
     .type = ParamType::kString,
     .defaultValue = "2",
     .validate = isEven,
     .accepted = "a number ending in an even digit",
     .doc = "validated text"},
};
constexpr size_t kTimeout = 0, kEnable = 1, kMode = 2, kLevel = 3, kEven = 4;

// Builds sources from an environment list and optional file contents.
struct Fixture {
  TempDir dir;
  std::vector<std::string> env;
  std::string etcPath = (dir.path() / "etc-nccl.conf").string();
  std::string home = (dir.path() / "home").string();

  Params resolve() const {
    std::vector<const char*> envp;
    for (const std::string& e : env) {
      envp.push_back(e.c_str());
    }
    envp.push_back(nullptr);
    return Params(kSpecs, ConfigSources::fromEnvironment(envp.data(), home, etcPath));
  }
  std::string confFile(const std::string& content) { return dir.write("user.conf", content); }
  void etc(const std::string& content) { dir.write("etc-nccl.conf", content); }
  void homeConf(const std::string& content) {
    std::filesystem::create_directories(home);
    dir.write("home/.nccl.conf", content);
  }
};

size_t countContaining(const std::vector<std::string>& v, const std::string& needle) {
  size_t n = 0;
  for (const auto& s : v) {
    n += s.find(needle) != std::string::npos ? 1 : 0;
  }
  return n;
}

}  // namespace

TEST_CASE("params: defaults apply when nothing is set", "[common][params]") {
  Fixture fx;
  const Params p = fx.resolve();
  CHECK(p.warnings().empty());
  CHECK(p.value(kTimeout).number == 2000);
  CHECK(p.value(kTimeout).origin == "default");
  CHECK(p.value(kEnable).number == 1);
  CHECK(p.value(kMode).number == 0);
  CHECK(p.value(kMode).text == "fast");
  CHECK(p.value(kLevel).text == "WARN");
  CHECK(p.value(kEven).text == "2");
}

TEST_CASE("params: environment values apply and are parsed by type", "[common][params]") {
  Fixture fx;
  fx.env = {"NCCL_RESILIENT_TIMEOUT_MS=0x10", "NCCL_RESILIENT_ENABLE=off",
            "NCCL_RESILIENT_MODE=SAFE", "NCCL_RESILIENT_EVEN=14", "UNRELATED=1"};
  const Params p = fx.resolve();
  CHECK(p.warnings().empty());
  CHECK(p.value(kTimeout).number == 16);  // NCCL parses with strtoll(..., 0)
  CHECK(p.value(kTimeout).origin == "environment");
  CHECK(p.value(kEnable).number == 0);
  CHECK(p.value(kMode).number == 1);
  CHECK(p.value(kMode).text == "safe");  // canonical spelling
  CHECK(p.value(kEven).text == "14");
}

TEST_CASE("params: a number with a leading zero is read as NCCL reads it, octal, with a word",
          "[common][params]") {
  // Issue 19 finding 3: "0700" became 448 without a word.
  Fixture fx;
  fx.env = {"NCCL_RESILIENT_TIMEOUT_MS=0700"};
  const Params p = fx.resolve();
  CHECK(p.value(kTimeout).number == 448);
  REQUIRE(p.warnings().size() == 1);
  CHECK(p.warnings()[0] ==
        "NCCL_RESILIENT_TIMEOUT_MS=0700 (from environment) is read as octal, 448, as NCCL reads "
        "it; without the leading 0 it is decimal");
  Fixture plain;
  plain.env = {"NCCL_RESILIENT_TIMEOUT_MS=70", "NCCL_RESILIENT_EVEN=10"};
  CHECK(plain.resolve().warnings().empty());
}

TEST_CASE("params: a conf-file value applies when the environment has none", "[common][params]") {
  Fixture fx;
  const std::string conf = fx.confFile("# tuning\nNCCL_RESILIENT_TIMEOUT_MS = 750\r\n");
  fx.env = {"NCCL_CONF_FILE=" + conf};
  const Params p = fx.resolve();
  CHECK(p.warnings().empty());
  CHECK(p.value(kTimeout).number == 750);
  CHECK(p.value(kTimeout).origin == conf);
}

TEST_CASE("params: the environment wins over the file", "[common][params]") {
  Fixture fx;
  const std::string conf = fx.confFile("NCCL_RESILIENT_TIMEOUT_MS=750\nNCCL_RESILIENT_MODE=off\n");
  fx.env = {"NCCL_CONF_FILE=" + conf, "NCCL_RESILIENT_TIMEOUT_MS=300"};
  const Params p = fx.resolve();
  CHECK(p.value(kTimeout).number == 300);
  CHECK(p.value(kTimeout).origin == "environment");
  CHECK(p.value(kMode).text == "off");  // the file still supplies what the environment lacks
}

TEST_CASE("params: NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf", "[common][params]") {
  Fixture fx;
  fx.etc("NCCL_RESILIENT_TIMEOUT_MS=111\nNCCL_RESILIENT_MODE=off\nNCCL_RESILIENT_EVEN=8\n");
  fx.homeConf("NCCL_RESILIENT_TIMEOUT_MS=222\nNCCL_RESILIENT_MODE=safe\n");
  SECTION("without NCCL_CONF_FILE the home file is read before /etc") {
    const Params p = fx.resolve();
    CHECK(p.value(kTimeout).number == 222);
    CHECK(p.value(kMode).text == "safe");
    CHECK(p.value(kEven).text == "8");
    CHECK(p.value(kEven).origin == fx.etcPath);
  }
  SECTION("NCCL_CONF_FILE replaces the home file; /etc still applies") {
    fx.env = {"NCCL_CONF_FILE=" + fx.confFile("NCCL_RESILIENT_TIMEOUT_MS=333\n")};
    const Params p = fx.resolve();
    CHECK(p.value(kTimeout).number == 333);
    CHECK(p.value(kMode).text == "off");  // from /etc, not from the home file
  }
  SECTION("an empty NCCL_CONF_FILE counts as unset") {
    fx.env = {"NCCL_CONF_FILE="};
    CHECK(fx.resolve().value(kTimeout).number == 222);
  }
}

TEST_CASE("params: a missing NCCL_CONF_FILE is reported", "[common][params]") {
  Fixture fx;
  fx.env = {"NCCL_CONF_FILE=" + (fx.dir.path() / "nope.conf").string()};
  const Params p = fx.resolve();
  REQUIRE(p.warnings().size() == 1);
  CHECK(p.warnings()[0].find("nope.conf: no such file") != std::string::npos);
}

TEST_CASE("params: an unknown NCCL_RESILIENT_* name gives one warning", "[common][params]") {
  Fixture fx;
  SECTION("with a suggestion when a known name is close") {
    fx.env = {"NCCL_RESILIENT_TIMEOUT_M=5"};
    const Params p = fx.resolve();
    REQUIRE(p.warnings().size() == 1);
    CHECK(p.warnings()[0] ==
          "unknown variable NCCL_RESILIENT_TIMEOUT_M=\"5\" (from environment) is ignored; did you "
          "mean NCCL_RESILIENT_TIMEOUT_MS?");
  }
  SECTION("once even when set in the environment and in a file") {
    fx.env = {"NCCL_RESILIENT_NO_SUCH_KNOB=1",
              "NCCL_CONF_FILE=" + fx.confFile("NCCL_RESILIENT_NO_SUCH_KNOB=2\n")};
    const Params p = fx.resolve();
    REQUIRE(p.warnings().size() == 1);
    CHECK(p.warnings()[0].find(
              "unknown variable NCCL_RESILIENT_NO_SUCH_KNOB=\"1\" (from environment)") == 0);
    CHECK(p.warnings()[0].find("resilient-config --list") != std::string::npos);
  }
  SECTION("other NCCL variables are not ours to judge") {
    fx.env = {"NCCL_NO_SUCH_THING=1", "NCCL_RESILIENTISH=1"};
    CHECK(fx.resolve().warnings().empty());
  }
}

TEST_CASE("params: a bad value gives one warning and the default", "[common][params]") {
  Fixture fx;
  SECTION("non-numeric value for a numeric knob") {
    fx.env = {"NCCL_RESILIENT_TIMEOUT_MS=fast"};
    const Params p = fx.resolve();
    REQUIRE(p.warnings().size() == 1);
    CHECK(p.warnings()[0] ==
          "NCCL_RESILIENT_TIMEOUT_MS=\"fast\" (from environment) is not valid: expected an integer "
          "in [1, 60000] ms; using the default 2000");
    CHECK(p.value(kTimeout).number == 2000);
    CHECK(p.value(kTimeout).origin == "default");
  }
  SECTION("trailing garbage, out of range, overflow") {
    const std::string bad =
        GENERATE("12abc", "0", "60001", "-5", "99999999999999999999999", "", " ");
    CAPTURE(bad);
    fx.env = {"NCCL_RESILIENT_TIMEOUT_MS=" + bad};
    const Params p = fx.resolve();
    CHECK(p.warnings().size() == 1);
    CHECK(p.value(kTimeout).number == 2000);
  }
  SECTION("bad bool, enum and validated string, from a file") {
    const std::string conf = fx.confFile(
        "NCCL_RESILIENT_ENABLE=maybe\nNCCL_RESILIENT_MODE=turbo\nNCCL_RESILIENT_EVEN=7\n");
    fx.env = {"NCCL_CONF_FILE=" + conf};
    const Params p = fx.resolve();
    REQUIRE(p.warnings().size() == 3);
    CHECK(countContaining(p.warnings(), "NCCL_RESILIENT_ENABLE=\"maybe\" (from " + conf +
                                            ") is not valid: expected a boolean") == 1);
    CHECK(countContaining(p.warnings(),
                          "expected one of fast, safe, off; using the default fast") == 1);
    CHECK(countContaining(p.warnings(),
                          "expected a number ending in an even digit; using the default 2") == 1);
  }
}

TEST_CASE("params: a knob falls back to the NCCL variable it inherits", "[common][params]") {
  Fixture fx;
  SECTION("NCCL's variable applies when ours is unset") {
    fx.env = {"NCCL_DEBUG=info"};
    const Params p = fx.resolve();
    CHECK(p.value(kLevel).text == "INFO");
    CHECK(p.value(kLevel).origin == "NCCL_DEBUG (environment)");
  }
  SECTION("ours wins over NCCL's, even from a file") {
    fx.env = {"NCCL_DEBUG=INFO", "NCCL_CONF_FILE=" + fx.confFile("NCCL_RESILIENT_LEVEL=NONE\n")};
    CHECK(fx.resolve().value(kLevel).text == "NONE");
  }
  SECTION("a bad inherited value is named in the warning") {
    fx.env = {"NCCL_DEBUG=LOUD"};
    const Params p = fx.resolve();
    REQUIRE(p.warnings().size() == 1);
    CHECK(p.warnings()[0].find(
              "NCCL_DEBUG=\"LOUD\" (from NCCL_DEBUG (environment)) is not valid") == 0);
    CHECK(p.value(kLevel).text == "WARN");
  }
}

TEST_CASE("params: malformed conf-file lines are warnings", "[common][params]") {
  Fixture fx;
  fx.env = {"NCCL_CONF_FILE=" + fx.confFile("NCCL_RESILIENT_MODE=safe\njunk line\n")};
  const Params p = fx.resolve();
  REQUIRE(p.warnings().size() == 1);
  CHECK(p.warnings()[0].find(":2: ignored line without '='") != std::string::npos);
  CHECK(p.value(kMode).text == "safe");
}

TEST_CASE("the real registry is well formed", "[common][params]") {
  const auto specs = registry();
  REQUIRE(specs.size() == kAllKnobs.size());
  std::set<std::string> names;
  for (size_t i = 0; i < specs.size(); ++i) {
    const ParamSpec& s = specs[i];
    CAPTURE(s.name);
    CHECK(std::string_view(s.name) == kAllKnobs[i]->name);
    CHECK(std::string(s.name).rfind("NCCL_RESILIENT_", 0) == 0);
    CHECK(names.insert(s.name).second);
    CHECK(std::string(s.doc).size() > 10);
    if (s.type == ParamType::kInt) {
      CHECK(s.min <= s.max);
    }
  }
  // Every default is accepted by its own type: resolving nothing warns about nothing.
  const Params p(specs, ConfigSources{});
  CHECK(p.warnings().empty());
}

// Each knob reads as its own type; there is no way to read it as another.
static_assert(std::is_same_v<decltype(Params::global().get<kLivenessTimeoutMs>()), int64_t>);
static_assert(std::is_same_v<decltype(Params::global().get<kProfiler>()), bool>);
static_assert(std::is_same_v<decltype(Params::global().get<kInner>()), const std::string&>);
static_assert(std::is_same_v<decltype(Params::global().get<kLogLevel>()), resilient::log::Level>);
static_assert(std::is_same_v<decltype(Params::global().get<kSocketFamily>()), SocketFamily>);

TEST_CASE("params: a knob reads as its type", "[common][params]") {
  const char* envp[] = {"NCCL_RESILIENT_LIVENESS_TIMEOUT_MS=2500",   "NCCL_RESILIENT_PROFILER=off",
                        "NCCL_RESILIENT_INNER=libnccl-net-other.so", "NCCL_DEBUG=INFO",
                        "NCCL_RESILIENT_SOCKET_FAMILY=af_inet6",     nullptr};
  const Params p(registry(), ConfigSources::fromEnvironment(envp, "", "/nonexistent/nccl.conf"));
  CHECK(p.warnings().empty());
  CHECK(p.get<kLivenessTimeoutMs>() == 2500);
  CHECK_FALSE(p.get<kProfiler>());
  CHECK(p.get<kProfilerProxySteps>());  // default
  CHECK(p.get<kInner>() == "libnccl-net-other.so");
  CHECK(p.get<kLogLevel>() == resilient::log::Level::kInfo);
  CHECK(p.get<kSocketFamily>() == SocketFamily::kInet6);
  CHECK(p.get<kRestartJob>() == "default");
}

TEST_CASE("params: get refuses Params resolved from other specs", "[common][params]") {
  Fixture fx;
  CHECK_THROWS_AS(fx.resolve().get<kProfiler>(), std::logic_error);
}
