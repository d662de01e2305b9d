// Test access to the fake net plugins (tests/support/fake_net): where each
// module is, its control functions, and loading it as an ExternalTransport.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <string>

#include "nccl/result.h"
#include "plugin/transport/external/external_transport.h"
#include "plugin/transport/external/loader.h"
#include "tests/support/fake_net/fake_net.h"

namespace resilient::test {

using transport::external::ExternalTransport;
using transport::external::LoadOptions;

// The versions the fakes exist for.
inline constexpr int kFirstFakeVersion = 6;
inline constexpr int kLastFakeVersion = 12;

// "libnccl-net-fake-v<N>.so" (N = 0: "libnccl-net-fake-none.so").
std::string fakeModuleName(int version);
// The module's full path in the build directory.
std::string fakeModulePath(int version);

// Holds the module open for its control functions (the loader's dlopen of the
// same path shares the mapping, hence the state). Resets the fake on creation.
class FakeModule {
 public:
  explicit FakeModule(int version);
  ~FakeModule();
  FakeModule(const FakeModule&) = delete;
  FakeModule& operator=(const FakeModule&) = delete;

  FakeNetStats stats() const;
  void reset() const;
  void failNext(const char* call, ncclResult_t result) const;
  void set(const char* knob, long value) const;
  // An exported symbol of the module (nullptr when absent).
  const void* symbol(const char* name) const;

 private:
  void* handle_ = nullptr;
  FakeNetStatsFn stats_ = nullptr;
  FakeNetResetFn reset_ = nullptr;
  FakeNetFailNextFn failNext_ = nullptr;
  FakeNetSetFn set_ = nullptr;
};

// Loads the fake of `version` by its full path; REQUIREs success.
std::unique_ptr<ExternalTransport> loadFake(int version, LoadOptions options = {});

// A connected send/recv pair on device 0 of one context.
struct FakePair {
  std::unique_ptr<transport::Listener> listener;
  std::unique_ptr<transport::SendComm> sendComm;
  std::unique_ptr<transport::RecvComm> recvComm;
  std::array<std::byte, 128> handle{};  // what listen wrote, as exchanged through bootstrap
  int connectPolls = 0;                 // connect calls that returned "poll again"
  int acceptPolls = 0;                  // accept calls that returned "poll again"
};

// listen, then connect and accept polled alternately until both have a comm.
FakePair connectFake(transport::Transport& t, transport::Context* ctx);
// Closes what connectFake opened (REQUIREs success).
void closeFake(FakePair& pair);

// Polls test() until done (REQUIREs it within a bounded number of calls);
// sizes as for Request::test.
void waitDone(transport::Request* request, int* sizes);

}  // namespace resilient::test
