// resilient_restart_wrapper_*, resilient_restart_run and the context calls
// (restart.h).
#include <memory>
#include <stdexcept>
#include <string>

#include "resilient/restart/host_communicator.hpp"
#include "resilient/restart/nccl_communicator.hpp"
#include "resilient/restart/wrapper.hpp"
#include "restart/capi/c_options.h"
#include "restart/capi/c_status.h"

namespace r = resilient::restart;
using r::capi::guarded;

struct resilient_restart_wrapper {
  std::unique_ptr<r::Wrapper> wrapper;
};

struct resilient_restart_context {
  r::CallContext* ctx;
};

namespace {

r::HostCommunicator& hostComm(resilient_restart_context* c, const char* name) {
  if (c == nullptr) {
    throw r::ConfigError("null context");
  }
  r::Communicator* comm =
      name == nullptr ? c->ctx->communicator() : c->ctx->communicator(std::string(name));
  auto* host = dynamic_cast<r::HostCommunicator*>(comm);
  if (host == nullptr) {
    throw r::ConfigError(std::string("communicator ") +
                         (name != nullptr ? name : "(the only one)") +
                         (comm == nullptr ? " does not exist in this iteration (a spare?)"
                                          : " is not a host communicator"));
  }
  return *host;
}

}  // namespace

extern "C" {

resilient_restart_wrapper* resilient_restart_wrapper_create(const resilient_restart_options* o) {
  resilient_restart_wrapper* out = nullptr;
  guarded([&] {
    if (o == nullptr) {
      throw r::ConfigError("wrapper_create: null options");
    }
    out = new resilient_restart_wrapper{std::make_unique<r::Wrapper>(o->resolved())};
    return 0;
  });
  return out;
}

void resilient_restart_wrapper_destroy(resilient_restart_wrapper* wrapper) {
  delete wrapper;
}

int resilient_restart_run(resilient_restart_wrapper* w, resilient_restart_function fn, void* user) {
  return guarded([&] {
    if (w == nullptr || fn == nullptr) {
      throw r::ConfigError("run: null wrapper or function");
    }
    w->wrapper->run([fn, user](r::CallContext& ctx) {
      resilient_restart_context c{&ctx};
      r::capi::takeCallbackError();
      const int rc = fn(&c, user);
      if (rc == RESILIENT_RESTART_OK) {
        r::capi::takeCallbackError();
        return;
      }
      const std::string what =
          r::capi::callbackFailure("the wrapped C function returned " + std::to_string(rc) + " (" +
                                   resilient_restart_status_name(rc) + ")");
      if (rc == RESILIENT_RESTART_SHOULD_RESTART) {
        throw r::RankShouldRestart(what);
      }
      if (rc == RESILIENT_RESTART_ABORTED) {
        throw r::RestartAbort(what);
      }
      throw r::RestartError(what);
    });
    return RESILIENT_RESTART_OK;
  });
}

int resilient_restart_wrapper_state(const resilient_restart_wrapper* w,
                                    resilient_restart_state* state) {
  return guarded([&] {
    if (w == nullptr || state == nullptr) {
      throw r::ConfigError("wrapper_state: null wrapper or state");
    }
    *state = r::capi::toC(w->wrapper->state());
    return 0;
  });
}

int resilient_restart_timeline_json(const resilient_restart_wrapper* w, char* buffer, size_t size,
                                    size_t* length) {
  return guarded([&] {
    if (w == nullptr || length == nullptr || (buffer == nullptr && size != 0)) {
      throw r::ConfigError("timeline_json: null wrapper or length, or a null buffer of size > 0");
    }
    r::capi::copyText(r::timelineJson(w->wrapper->timeline()), buffer, size, length);
    return 0;
  });
}

int resilient_restart_context_state(const resilient_restart_context* c,
                                    resilient_restart_state* state) {
  return guarded([&] {
    if (c == nullptr || state == nullptr) {
      throw r::ConfigError("context_state: null context or state");
    }
    *state = r::capi::toC(c->ctx->state());
    return 0;
  });
}

int resilient_restart_context_watch_nccl_comm(resilient_restart_context* c, void* comm,
                                              const char* library) {
  return guarded([&] {
    if (c == nullptr || comm == nullptr) {
      throw r::ConfigError("watch_nccl_comm: null context or communicator");
    }
    r::NcclOptions options;
    if (library != nullptr && library[0] != '\0') {
      options.library = library;
    }
    c->ctx->registerCommunicator(r::NcclCommunicator::adopt(
        static_cast<ncclComm*>(comm), c->ctx->state(), "adopted nccl comm", options));
    return 0;
  });
}

void resilient_restart_ping(resilient_restart_context* c) {
  if (c != nullptr) {
    c->ctx->ping();
  }
}

int resilient_restart_cancelled(const resilient_restart_context* c) {
  return c != nullptr && c->ctx->cancelled() ? 1 : 0;
}

void resilient_restart_atomic_begin(resilient_restart_context* c) {
  if (c != nullptr) {
    c->ctx->atomicBegin();
  }
}

void resilient_restart_atomic_end(resilient_restart_context* c) {
  if (c != nullptr) {
    c->ctx->atomicEnd();
  }
}

void resilient_restart_hang_protection_off(resilient_restart_context* c) {
  if (c != nullptr) {
    c->ctx->hangProtectionOff();
  }
}

int resilient_restart_collective_enter(resilient_restart_context* c, const char* group,
                                       const char* function, int rank, int nranks) {
  return guarded([&] {
    if (c == nullptr || group == nullptr || *group == '\0' || rank < 0 || nranks <= rank) {
      throw std::invalid_argument("collective_enter: a context, a group name and 0 <= rank (" +
                                  std::to_string(rank) + ") < nranks (" + std::to_string(nranks) +
                                  ") are required");
    }
    c->ctx->enterCollective(group, function != nullptr ? function : "", rank, nranks);
    return 0;
  });
}

int resilient_restart_collective_leave(resilient_restart_context* c, const char* group) {
  return guarded([&] {
    if (c == nullptr || group == nullptr || *group == '\0') {
      throw std::invalid_argument("collective_leave: a context and a group name are required");
    }
    c->ctx->leaveCollective(group);
    return 0;
  });
}

void resilient_restart_hang_protection_on(resilient_restart_context* c) {
  if (c != nullptr) {
    c->ctx->hangProtectionOn();
  }
}

int resilient_restart_allreduce_sum_f32(resilient_restart_context* c, const char* name,
                                        const float* in, float* out, size_t count) {
  return guarded([&] {
    hostComm(c, name).allReduce(in, out, count);
    return 0;
  });
}

int resilient_restart_broadcast(resilient_restart_context* c, const char* name, void* data,
                                size_t bytes, int root) {
  return guarded([&] {
    hostComm(c, name).broadcast(data, bytes, root);
    return 0;
  });
}

int resilient_restart_barrier(resilient_restart_context* c, const char* name) {
  return guarded([&] {
    hostComm(c, name).barrier();
    return 0;
  });
}

}  // extern "C"
