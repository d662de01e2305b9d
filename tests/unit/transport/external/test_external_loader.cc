// Loading an external net plugin: NCCL's name resolution, the version
// lookup, the errors of a missing library or symbol, and the refusal to load
// the resilient plugin itself.
#include <cstdlib>
#include <filesystem>
#include <string>

#include <catch2/catch.hpp>

#include "nccl/net_v6.h"
#include "plugin/transport/external/loader.h"
#include "plugin/transport/external/shim.h"
#include "tests/support/temp_dir.h"
#include "tests/unit/transport/external/fake_plugin.h"

using namespace resilient;
using namespace resilient::test;
using transport::external::loadExternalPlugin;

namespace {

std::string realPathOf(const std::string& path) {
  std::error_code ec;
  std::filesystem::path p = std::filesystem::canonical(path, ec);
  return ec ? path : p.string();
}

Result<std::unique_ptr<ExternalTransport>> load(const std::string& spec, LoadOptions options = {}) {
  options.spec = spec;
  return loadExternalPlugin(options);
}

}  // namespace

TEST_CASE("every fake version loads by path through its own symbol", "[external][load]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  FakeModule fake(version);
  auto t = loadFake(version);
  CHECK(t->abiVersion() == version);
  CHECK(std::string(t->name()) == "FakeV" + std::to_string(version));
  CHECK(t->libraryPath() == realPathOf(fakeModulePath(version)));
  CHECK(t->handleBytes() == transport::kHandleSize);
  CHECK(t->liveContexts() == 0);
  // Loading runs nothing of the plugin.
  CHECK(fake.stats().initCalls == 0);
}

TEST_CASE("the symbols are looked up newest first, as NCCL does", "[external][load]") {
  const auto& names = transport::external::pluginSymbolNames();
  REQUIRE(names.size() == 7);
  CHECK(names.front() == "ncclNetPlugin_v12");
  CHECK(names.back() == "ncclNetPlugin_v6");
}

TEST_CASE("a library that cannot be loaded is a clear error", "[external][load]") {
  SECTION("a path: one attempt, with dlerror()") {
    const std::string spec = std::string(FAKE_NET_DIR) + "/libnccl-net-absent.so";
    auto r = load(spec);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().kind() == ErrorKind::kInvalidUsage);
    const std::string m = r.status().message();
    CHECK_THAT(m, Catch::Contains("NCCL_RESILIENT_INNER=" + spec + ": cannot load"));
    CHECK_THAT(m, Catch::Contains("dlopen(" + spec + "): "));
    CHECK_THAT(m, Catch::Contains("No such file or directory"));
    CHECK_THAT(m, !Catch::Contains("libnccl-net-libnccl"));
  }
  SECTION("a bare name: the name, then libnccl-net-<name>.so") {
    auto r = load("absent-net");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().kind() == ErrorKind::kInvalidUsage);
    CHECK_THAT(r.status().message(), Catch::Contains("dlopen(absent-net): "));
    CHECK_THAT(r.status().message(), Catch::Contains("dlopen(libnccl-net-absent-net.so): "));
  }
  SECTION("a lib*.so name: no second attempt") {
    auto r = load("libabsent-net.so");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("dlopen(libabsent-net.so): "));
    CHECK_THAT(r.status().message(), !Catch::Contains("libnccl-net-libabsent"));
  }
  SECTION("an empty name") {
    auto r = load("");
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().kind() == ErrorKind::kInvalidUsage);
    CHECK_THAT(r.status().message(), Catch::Contains("NCCL_RESILIENT_INNER is empty"));
  }
}

TEST_CASE("a library without any ncclNetPlugin symbol is named with the symbols tried",
          "[external][load]") {
  FakeModule none(0);
  CHECK(none.stats().version == 0);
  auto r = load(fakeModulePath(0));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().kind() == ErrorKind::kInvalidUsage);
  const std::string m = r.status().message();
  CHECK_THAT(m, Catch::Contains(realPathOf(fakeModulePath(0))));
  for (const std::string& symbol : transport::external::pluginSymbolNames()) {
    CHECK_THAT(m, Catch::Contains(symbol));
  }
}

namespace {

ncclResult_t dummyInit(ncclDebugLogger_t /*logger*/) {
  return ncclSuccess;
}

}  // namespace

TEST_CASE("a plugin struct is loaded with init alone, and refused after init if incomplete",
          "[external][load]") {
  ncclNet_v6_t broken{};
  broken.name = "Broken";
  transport::external::PluginBinding binding;
  binding.version = 6;
  binding.symbol = &broken;
  SECTION("no init: NCCL could not start it, refused at load") {
    auto r = transport::external::makeV6(std::move(binding));
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().kind() == ErrorKind::kInvalidUsage);
    CHECK_THAT(r.status().message(), Catch::Contains("Broken (ncclNetPlugin_v6)"));
    CHECK_THAT(r.status().message(), Catch::EndsWith("leaves required members NULL: init"));
  }
  SECTION("init that leaves members NULL: loaded, refused by initContext, which stays refused") {
    broken.init = &dummyInit;
    auto r = transport::external::makeV6(std::move(binding));
    REQUIRE(r.ok());
    std::unique_ptr<transport::Context> ctx;
    for (int attempt = 0; attempt < 2; ++attempt) {
      const Status s = r.value()->initContext(1, transport::CommConfig{}, &ctx);
      REQUIRE_FALSE(s.ok());
      CHECK(ctx == nullptr);
      CHECK(s.kind() == ErrorKind::kInvalidUsage);
      CHECK_THAT(s.message(), Catch::Contains("Broken (ncclNetPlugin_v6)"));
      CHECK_THAT(s.message(), Catch::Contains("devices, getProperties, listen"));
      CHECK_THAT(s.message(), !Catch::Contains("init"));
    }
  }
}

TEST_CASE("a plugin whose init fills its table (nccl-rdma-sharp-plugins) loads and works",
          "[external][load]") {
  const std::string path = std::string(FAKE_NET_DIR) + "/libnccl-net-fake-v11-lazy.so";
  auto r = load(path);
  INFO(r.status().toString());
  REQUIRE(r.ok());
  ExternalTransport& t = *r.value();
  CHECK(t.abiVersion() == 11);
  CHECK(std::string(t.name()) == "FakeV11Lazy");
  std::unique_ptr<transport::Context> ctx;
  REQUIRE(t.initContext(7, transport::CommConfig{}, &ctx).ok());
  int ndev = 0;
  REQUIRE(t.devices(&ndev).ok());
  CHECK(ndev >= 1);
  FakePair pair = connectFake(t, ctx.get());
  CHECK(pair.sendComm != nullptr);
  CHECK(pair.recvComm != nullptr);
  closeFake(pair);
  CHECK(ctx->finalize().ok());
}

TEST_CASE("a bare name resolves like NCCL_NET_PLUGIN through LD_LIBRARY_PATH",
          "[external][.resolve]") {
  const char* path = getenv("LD_LIBRARY_PATH");  // NOLINT(concurrency-mt-unsafe): one thread
  INFO("run with LD_LIBRARY_PATH=" FAKE_NET_DIR " (meson test does)");
  REQUIRE(path != nullptr);
  REQUIRE_THAT(std::string(path), Catch::Contains(FAKE_NET_DIR));

  SECTION("name -> libnccl-net-<name>.so") {
    const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
    CAPTURE(version);
    FakeModule fake(version);
    auto r = load("fake-v" + std::to_string(version));
    INFO(r.status().toString());
    REQUIRE(r.ok());
    CHECK(r.value()->abiVersion() == version);
    CHECK(r.value()->libraryPath() == realPathOf(fakeModulePath(version)));
  }
  SECTION("a lib*.so name is opened as given") {
    FakeModule fake(7);
    auto r = load("libnccl-net-fake-v7.so");
    INFO(r.status().toString());
    REQUIRE(r.ok());
    CHECK(r.value()->abiVersion() == 7);
  }
  SECTION("the fallback applies to bare names only") {
    auto r = load("./fake-v7");
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), !Catch::Contains("libnccl-net-"));
  }
}

TEST_CASE("the resilient plugin refuses to wrap itself", "[external][self]") {
  const int version = GENERATE(range(kFirstFakeVersion, kLastFakeVersion + 1));
  CAPTURE(version);
  FakeModule self(version);
  const std::string symbol = "ncclNetPlugin_v" + std::to_string(version);
  const void* ownStruct = self.symbol(symbol.c_str());
  REQUIRE(ownStruct != nullptr);
  const std::string realPath = realPathOf(fakeModulePath(version));

  SECTION("by path: the library exports our own struct") {
    LoadOptions o;
    o.selfSymbols = {ownStruct};
    const std::string spec = fakeModulePath(version);
    auto r = load(spec, o);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().kind() == ErrorKind::kInvalidUsage);
    CHECK(r.status().message() == "NCCL_RESILIENT_INNER=" + spec +
                                      " resolves to the resilient plugin itself (" + realPath +
                                      "); choose another plugin");
  }
  SECTION("through a symlink named libnccl-net.so") {
    TempDir dir;
    const std::filesystem::path link = dir.path() / "libnccl-net.so";
    std::filesystem::create_symlink(fakeModulePath(version), link);
    LoadOptions o;
    o.selfSymbols = {ownStruct};
    auto r = load(link.string(), o);
    REQUIRE_FALSE(r.ok());
    CHECK(r.status().kind() == ErrorKind::kInvalidUsage);
    CHECK(r.status().message() == "NCCL_RESILIENT_INNER=" + link.string() +
                                      " resolves to the resilient plugin itself (" + realPath +
                                      "); choose another plugin");
  }
  SECTION("by file: the library is the file that holds the caller's symbols") {
    LoadOptions o;
    o.selfSymbols = {self.symbol("fakeNetStats")};  // not a plugin struct, but in that file
    auto r = load(fakeModulePath(version), o);
    REQUIRE_FALSE(r.ok());
    CHECK_THAT(r.status().message(), Catch::Contains("resolves to the resilient plugin itself"));
  }
  SECTION("refuseSelf = false loads it") {
    LoadOptions o;
    o.selfSymbols = {ownStruct};
    o.refuseSelf = false;
    auto r = load(fakeModulePath(version), o);
    INFO(r.status().toString());
    CHECK(r.ok());
  }
  SECTION("another library's symbols do not refuse it") {
    const int other = version == kLastFakeVersion ? kFirstFakeVersion : version + 1;
    FakeModule otherModule(other);
    LoadOptions o;
    o.selfSymbols = {otherModule.symbol(("ncclNetPlugin_v" + std::to_string(other)).c_str())};
    REQUIRE(o.selfSymbols[0] != nullptr);
    auto r = load(fakeModulePath(version), o);
    INFO(r.status().toString());
    CHECK(r.ok());
  }
  SECTION("without self symbols the loader's own file is compared (here: the test binary)") {
    auto r = load(fakeModulePath(version));
    INFO(r.status().toString());
    CHECK(r.ok());
  }
}
