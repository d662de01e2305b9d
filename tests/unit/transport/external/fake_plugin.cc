#include "tests/unit/transport/external/fake_plugin.h"

#include <dlfcn.h>

#include <catch2/catch.hpp>

namespace resilient::test {

std::string fakeModuleName(int version) {
  std::string name = "libnccl-net-fake-";
  name += version == 0 ? std::string("none") : "v" + std::to_string(version);
  name += ".so";
  return name;
}

std::string fakeModulePath(int version) {
  std::string path = FAKE_NET_DIR;
  path += '/';
  path += fakeModuleName(version);
  return path;
}

FakeModule::FakeModule(int version) {
  const std::string path = fakeModulePath(version);
  handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle_ == nullptr) {
    FAIL("cannot open " << path << ": " << dlerror());  // NOLINT(concurrency-mt-unsafe)
  }
  stats_ = reinterpret_cast<FakeNetStatsFn>(dlsym(handle_, "fakeNetStats"));
  reset_ = reinterpret_cast<FakeNetResetFn>(dlsym(handle_, "fakeNetReset"));
  failNext_ = reinterpret_cast<FakeNetFailNextFn>(dlsym(handle_, "fakeNetFailNext"));
  set_ = reinterpret_cast<FakeNetSetFn>(dlsym(handle_, "fakeNetSet"));
  REQUIRE(stats_ != nullptr);
  REQUIRE(reset_ != nullptr);
  REQUIRE(failNext_ != nullptr);
  REQUIRE(set_ != nullptr);
  reset();
}

FakeModule::~FakeModule() {
  if (handle_ != nullptr) {
    dlclose(handle_);
  }
}

FakeNetStats FakeModule::stats() const {
  FakeNetStats s{};
  stats_(&s);
  return s;
}

void FakeModule::reset() const {
  reset_();
}

void FakeModule::failNext(const char* call, ncclResult_t result) const {
  failNext_(call, static_cast<int>(result));
}

void FakeModule::set(const char* knob, long value) const {
  REQUIRE(set_(knob, value) == 0);
}

const void* FakeModule::symbol(const char* name) const {
  return dlsym(handle_, name);
}

std::unique_ptr<ExternalTransport> loadFake(int version, LoadOptions options) {
  options.spec = fakeModulePath(version);
  auto loaded = transport::external::loadExternalPlugin(options);
  INFO(loaded.status().toString());
  REQUIRE(loaded.ok());
  return std::move(loaded).value();
}

FakePair connectFake(transport::Transport& t, transport::Context* ctx) {
  FakePair p;
  REQUIRE(t.listen(ctx, 0, p.handle.data(), &p.listener).ok());
  REQUIRE(p.listener != nullptr);
  // The connecting side gets its own copy of the handle, as through bootstrap.
  std::array<std::byte, 128> remote = p.handle;
  for (int i = 0; i < 100 && (p.sendComm == nullptr || p.recvComm == nullptr); ++i) {
    if (p.sendComm == nullptr) {
      REQUIRE(t.connect(ctx, 0, remote.data(), false, &p.sendComm).ok());
      p.connectPolls += p.sendComm == nullptr ? 1 : 0;
    }
    if (p.recvComm == nullptr) {
      REQUIRE(p.listener->accept(false, &p.recvComm).ok());
      p.acceptPolls += p.recvComm == nullptr ? 1 : 0;
    }
  }
  REQUIRE(p.sendComm != nullptr);
  REQUIRE(p.recvComm != nullptr);
  return p;
}

void closeFake(FakePair& pair) {
  if (pair.sendComm != nullptr) {
    REQUIRE(pair.sendComm->close().ok());
    pair.sendComm.reset();
  }
  if (pair.recvComm != nullptr) {
    REQUIRE(pair.recvComm->close().ok());
    pair.recvComm.reset();
  }
  if (pair.listener != nullptr) {
    REQUIRE(pair.listener->close().ok());
    pair.listener.reset();
  }
}

void waitDone(transport::Request* request, int* sizes) {
  REQUIRE(request != nullptr);
  int done = 0;
  for (int i = 0; i < 100 && done == 0; ++i) {
    Status s = request->test(&done, sizes);
    INFO(s.toString());
    REQUIRE(s.ok());
  }
  REQUIRE(done == 1);
}

}  // namespace resilient::test
