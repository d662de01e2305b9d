// resilient_restart_store_* (restart.h): a client of the job's store for
// programs that coordinate through it themselves (the Python package's
// torch.distributed.Store).
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "resilient/restart.h"
#include "resilient/restart/errors.hpp"
#include "restart/capi/c_status.h"
#include "store/client_options.h"
#include "store/errors.h"
#include "store/open_store.h"
#include "store/store.h"

namespace r = resilient::restart;
namespace st = resilient::store;
using r::capi::guarded;

struct resilient_restart_store {
  std::shared_ptr<st::Store> store;
};

namespace {

st::Timeout timeoutOf(long long ms) {
  return ms < 0 ? st::Timeout() : st::Timeout(st::Millis(ms));
}

// Runs `body`, the store's timeout and argument errors turned into the
// restart library's (whose C statuses are TIMEOUT and CONFIG).
template <class F>
void translated(F&& body) {
  try {
    body();
  } catch (const st::TimeoutError& e) {
    throw r::TimeoutError(e.what());
  } catch (const st::InvalidArgument& e) {
    throw r::ConfigError(e.what());
  }
}

// guarded() for store calls.
template <class F>
int storeCall(resilient_restart_store* s, const char* what, F&& body) noexcept {
  return guarded([&] {
    if (s == nullptr) {
      throw r::ConfigError(std::string(what) + ": null store");
    }
    translated([&] { body(*s->store); });
    return 0;
  });
}

// A malloc'd copy the caller frees with resilient_restart_free.
char* copyOut(const std::string& value) {
  auto* out = static_cast<char*>(std::malloc(value.size() + 1));  // NOLINT: C API ownership
  if (out == nullptr) {
    throw std::bad_alloc();
  }
  std::memcpy(out, value.data(), value.size());
  out[value.size()] = '\0';
  return out;
}

std::vector<std::string> keysOf(const char* const* keys, size_t n) {
  if (keys == nullptr && n > 0) {
    throw r::ConfigError("null key list");
  }
  std::vector<std::string> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    if (keys[i] == nullptr) {
      throw r::ConfigError("null key in the list");
    }
    out.emplace_back(keys[i]);
  }
  return out;
}

}  // namespace

extern "C" {

resilient_restart_store* resilient_restart_store_open(const char* url, long long timeout_ms) {
  resilient_restart_store* out = nullptr;
  guarded([&] {
    if (url == nullptr || url[0] == '\0') {
      throw r::ConfigError("store_open: no store URL");
    }
    st::ClientOptions options = st::ClientOptions::fromParams();
    // As the loop's, the monitor's and the agent's: the job's store restarts
    // (resilient-run), and a client that refused the new instance failed
    // every later call (torch's process groups over the Python Store hung in
    // their rendezvous after a store restart).
    options.followRestarts = true;
    if (timeout_ms >= 0) {
      options.defaultTimeout = st::Millis(timeout_ms);
    }
    translated([&] { out = new resilient_restart_store{st::openStore(url, options)}; });
    return 0;
  });
  return out;
}

void resilient_restart_store_close(resilient_restart_store* store) {
  delete store;
}

void resilient_restart_free(void* memory) {
  std::free(memory);  // NOLINT: what copyOut allocated
}

int resilient_restart_store_set(resilient_restart_store* s, const char* key, const void* value,
                                size_t length, long long timeout_ms) {
  return storeCall(s, "store_set", [&](st::Store& store) {
    if (key == nullptr || (value == nullptr && length > 0)) {
      throw r::ConfigError("store_set: null key or value");
    }
    store.set(key, std::string_view(static_cast<const char*>(value), length),
              timeoutOf(timeout_ms));
  });
}

int resilient_restart_store_get(resilient_restart_store* s, const char* key, char** value,
                                size_t* length, int* found, long long timeout_ms) {
  return storeCall(s, "store_get", [&](st::Store& store) {
    if (key == nullptr || value == nullptr || length == nullptr || found == nullptr) {
      throw r::ConfigError("store_get: null argument");
    }
    *value = nullptr;
    *length = 0;
    *found = 0;
    const std::optional<std::string> got = store.get(key, timeoutOf(timeout_ms));
    if (got) {
      *value = copyOut(*got);
      *length = got->size();
      *found = 1;
    }
  });
}

int resilient_restart_store_add(resilient_restart_store* s, const char* key, long long delta,
                                long long* result, long long timeout_ms) {
  return storeCall(s, "store_add", [&](st::Store& store) {
    if (key == nullptr || result == nullptr) {
      throw r::ConfigError("store_add: null key or result");
    }
    *result = store.add(key, delta, timeoutOf(timeout_ms));
  });
}

int resilient_restart_store_compare_set(resilient_restart_store* s, const char* key,
                                        const void* expected, size_t expected_length,
                                        int expect_absent, const void* desired,
                                        size_t desired_length, int* swapped, char** current,
                                        size_t* current_length, int* current_found,
                                        long long timeout_ms) {
  return storeCall(s, "store_compare_set", [&](st::Store& store) {
    if (key == nullptr || swapped == nullptr || current == nullptr || current_length == nullptr ||
        current_found == nullptr || (desired == nullptr && desired_length > 0) ||
        (!expect_absent && expected == nullptr && expected_length > 0)) {
      throw r::ConfigError("store_compare_set: null argument");
    }
    *current = nullptr;
    *current_length = 0;
    *current_found = 0;
    std::optional<std::string_view> want;
    if (expect_absent == 0) {
      want = std::string_view(static_cast<const char*>(expected), expected_length);
    }
    const st::CasResult cas = store.compareSet(
        key, want, std::string_view(static_cast<const char*>(desired), desired_length),
        timeoutOf(timeout_ms));
    *swapped = cas.swapped ? 1 : 0;
    if (cas.current) {
      *current = copyOut(*cas.current);
      *current_length = cas.current->size();
      *current_found = 1;
    }
  });
}

int resilient_restart_store_wait(resilient_restart_store* s, const char* const* keys, size_t n,
                                 long long timeout_ms) {
  return storeCall(s, "store_wait",
                   [&](st::Store& store) { store.wait(keysOf(keys, n), timeoutOf(timeout_ms)); });
}

int resilient_restart_store_check(resilient_restart_store* s, const char* const* keys, size_t n,
                                  int* present, long long timeout_ms) {
  return storeCall(s, "store_check", [&](st::Store& store) {
    if (present == nullptr) {
      throw r::ConfigError("store_check: null result");
    }
    *present = store.check(keysOf(keys, n), timeoutOf(timeout_ms)) ? 1 : 0;
  });
}

int resilient_restart_store_delete(resilient_restart_store* s, const char* key, int* existed,
                                   long long timeout_ms) {
  return storeCall(s, "store_delete", [&](st::Store& store) {
    if (key == nullptr) {
      throw r::ConfigError("store_delete: null key");
    }
    const bool was = store.remove(key, timeoutOf(timeout_ms));
    if (existed != nullptr) {
      *existed = was ? 1 : 0;
    }
  });
}

int resilient_restart_store_delete_prefix(resilient_restart_store* s, const char* prefix,
                                          long long* removed, long long timeout_ms) {
  return storeCall(s, "store_delete_prefix", [&](st::Store& store) {
    if (prefix == nullptr) {
      throw r::ConfigError("store_delete_prefix: null prefix");
    }
    const uint64_t n = store.removePrefix(prefix, timeoutOf(timeout_ms));
    if (removed != nullptr) {
      *removed = static_cast<long long>(n);
    }
  });
}

}  // extern "C"
