// A stand-in libnccl (see fake_nccl.h). Built in variants by the tests'
// meson.build: FAKE_NCCL_VERSION (the ncclGetVersion code) and
// FAKE_NCCL_NO_FINALIZE (an incomplete library). Written for these tests only.
#include <cstring>
#include <mutex>

#include "nccl/api.h"
#include "tests/unit/restart/comm/fake_nccl.h"

#ifndef FAKE_NCCL_VERSION
#define FAKE_NCCL_VERSION 22809
#endif

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

FakeNcclControl control;

struct FakeComm {
  int pollsLeft = 0;  // -1: in progress forever
  ncclResult_t result = ncclSuccess;
  ncclResult_t proxyResult = ncclSuccess;  // read when result is success
  bool revoked = false;
};

std::mutex mutex;  // guards every FakeComm

ncclResult_t startWork(FakeComm* c, int polls, ncclResult_t result) {
  c->pollsLeft = polls;
  c->result = result;
  return polls == 0 ? result : ncclInProgress;
}

bool configOk(const ncclConfig_t* config) {
  return config != nullptr && config->magic == NCCL_CONFIG_MAGIC_VALUE &&
         config->size == sizeof(ncclConfig_t) && config->blocking == 0;
}

}  // namespace

struct ncclComm : FakeComm {};

extern "C" {
FakeNcclControl* fakeNcclControl();
void fakeNcclSetAsyncError(void* comm, int result);
void fakeNcclSetProxyError(void* comm, int result);
ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t* config);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* result);
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags);
ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int count, ncclComm_t* newcomm,
                            ncclConfig_t* config, int flags);
ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* id);
ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* id, int rank,
                          ncclComm_t* newcomm, ncclConfig_t* config);
const char* ncclGetErrorString(ncclResult_t result);
const char* ncclGetLastError(ncclComm_t comm);
}

FAKE_EXPORT FakeNcclControl* fakeNcclControl() {
  return &control;
}

FAKE_EXPORT void fakeNcclSetAsyncError(void* comm, int result) {
  const std::lock_guard<std::mutex> lock(mutex);
  static_cast<ncclComm*>(comm)->result = static_cast<ncclResult_t>(result);
}

FAKE_EXPORT void fakeNcclSetProxyError(void* comm, int result) {
  const std::lock_guard<std::mutex> lock(mutex);
  static_cast<ncclComm*>(comm)->proxyResult = static_cast<ncclResult_t>(result);
}

FAKE_EXPORT ncclResult_t ncclGetVersion(int* version) {
  *version = FAKE_NCCL_VERSION;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  const int r = control.uniqueIdResult.load();
  if (r != ncclSuccess) {
    return static_cast<ncclResult_t>(r);
  }
  const int n = ++control.uniqueIds;
  std::memset(id->internal, 0, sizeof(id->internal));
  std::memcpy(id->internal, "fake-id", 7);
  id->internal[8] = static_cast<char>(n);
  id->internal[127] = 'z';  // the whole id travels, not a C string
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id,
                                                int rank, ncclConfig_t* config) {
  ++control.inits;
  if (!configOk(config)) {
    ++control.badConfigs;
  }
  if (nranks < 1 || rank < 0 || rank >= nranks || std::memcmp(id.internal, "fake-id", 7) != 0 ||
      id.internal[127] != 'z') {
    *comm = nullptr;
    return ncclInvalidArgument;
  }
  const int r = control.initResult.load();
  if (r != ncclInProgress && r != ncclSuccess) {
    *comm = nullptr;
    return static_cast<ncclResult_t>(r);
  }
  const std::lock_guard<std::mutex> lock(mutex);
  auto* c = new ncclComm();
  ++control.liveComms;
  *comm = c;
  return startWork(c, control.initPolls.load(),
                   static_cast<ncclResult_t>(control.readyResult.load()));
}

FAKE_EXPORT ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* result) {
  const std::lock_guard<std::mutex> lock(mutex);
  if (comm->pollsLeft != 0) {
    if (comm->pollsLeft > 0) {
      --comm->pollsLeft;
    }
    *result = ncclInProgress;
    return ncclSuccess;
  }
  *result = comm->result != ncclSuccess ? comm->result : comm->proxyResult;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (comm == nullptr) {
    return ncclSuccess;
  }
  ++control.aborts;
  const std::lock_guard<std::mutex> lock(mutex);
  delete comm;
  --control.liveComms;
  return ncclSuccess;
}

FAKE_EXPORT ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (comm == nullptr) {
    return ncclSuccess;
  }
  ++control.destroys;
  const std::lock_guard<std::mutex> lock(mutex);
  const ncclResult_t state = comm->result != ncclSuccess ? comm->result : comm->proxyResult;
  if (comm->pollsLeft == 0 && state != ncclSuccess) {
    ++control.leakedGroups;
    return state;
  }
  delete comm;
  --control.liveComms;
  return ncclSuccess;
}

#ifndef FAKE_NCCL_NO_FINALIZE
FAKE_EXPORT ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  ++control.finalizes;
  const std::lock_guard<std::mutex> lock(mutex);
  if (comm->revoked) {
    return ncclInvalidArgument;
  }
  if (comm->result != ncclSuccess) {
    return comm->result;  // a broken communicator cannot be finalized
  }
  return startWork(comm, 1, ncclSuccess);
}
#endif

FAKE_EXPORT ncclResult_t ncclCommRevoke(ncclComm_t comm, int flags) {
  const std::lock_guard<std::mutex> lock(mutex);
  if (flags != NCCL_REVOKE_DEFAULT || comm->revoked) {
    return ncclInvalidArgument;
  }
  ++control.revokes;
  comm->revoked = true;
  return startWork(comm, 2, ncclSuccess);
}

FAKE_EXPORT ncclResult_t ncclCommShrink(ncclComm_t comm, int* exclude, int count,
                                        ncclComm_t* newcomm, ncclConfig_t* config, int flags) {
  ++control.shrinks;
  if (!configOk(config)) {
    ++control.badConfigs;
  }
  control.lastShrinkFlags = flags;
  control.lastShrinkCount = count;
  control.lastShrinkFirst = count > 0 ? exclude[0] : -1;
  const std::lock_guard<std::mutex> lock(mutex);
  if (comm == nullptr || comm->pollsLeft != 0) {
    return ncclInvalidArgument;  // freed, or still busy: a caller bug
  }
  auto* c = new ncclComm();
  ++control.liveComms;
  *newcomm = c;
  return startWork(c, control.initPolls.load(),
                   static_cast<ncclResult_t>(control.readyResult.load()));
}

// 2.29's grow, as its contract reads: existing ranks pass their (ready)
// communicator and rank -1, the root with the id it got from
// ncclCommGetUniqueId; new ranks pass NULL, that id and their rank.
FAKE_EXPORT ncclResult_t ncclCommGetUniqueId(ncclComm_t comm, ncclUniqueId* id) {
  ++control.growIds;
  const std::lock_guard<std::mutex> lock(mutex);
  if (comm == nullptr || comm->pollsLeft != 0 || id == nullptr) {
    ++control.badGrows;
    return ncclInvalidArgument;
  }
  std::memset(id->internal, 0x6b, sizeof(id->internal));
  return static_cast<ncclResult_t>(control.growIdResult.load());
}

FAKE_EXPORT ncclResult_t ncclCommGrow(ncclComm_t comm, int nRanks, const ncclUniqueId* id,
                                      int rank, ncclComm_t* newcomm, ncclConfig_t* config) {
  if (!configOk(config)) {
    ++control.badConfigs;
  }
  control.lastGrowRanks = nRanks;
  const std::lock_guard<std::mutex> lock(mutex);
  if (comm != nullptr) {
    ++control.grows;
    if (rank != -1 || comm->pollsLeft != 0) {
      ++control.badGrows;
      return ncclInvalidArgument;
    }
  } else {
    ++control.growJoins;
    if (id == nullptr || rank < 0 || rank >= nRanks || id->internal[0] != 0x6b) {
      ++control.badGrows;
      return ncclInvalidArgument;
    }
  }
  const auto result = static_cast<ncclResult_t>(control.growResult.load());
  if (result != ncclSuccess && result != ncclInProgress) {
    return result;
  }
  auto* c = new ncclComm();
  ++control.liveComms;
  *newcomm = c;
  return startWork(c, control.growPolls.load(),
                   static_cast<ncclResult_t>(control.readyResult.load()));
}

FAKE_EXPORT const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess: return "fake: no error";
    case ncclUnhandledCudaError: return "fake: unhandled cuda error";
    case ncclSystemError: return "fake: system error";
    case ncclRemoteError: return "fake: remote error";
    default: return "fake: some error";
  }
}

FAKE_EXPORT const char* ncclGetLastError(ncclComm_t) {
  return "fake last error";
}
