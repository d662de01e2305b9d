#include "restart/capi/c_status.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "resilient/restart/errors.hpp"
#include "resilient/restart/host_communicator.hpp"
#include "resilient/version.h"
#include "restart/capi/c_constants.h"

namespace resilient::restart::capi {

namespace {

thread_local std::string tLastError;

}  // namespace

void setLastError(const std::string& message) noexcept {
  try {
    tLastError = message;
  } catch (...) {
    tLastError.clear();
  }
}

const char* lastError() noexcept {
  return tLastError.c_str();
}

namespace {
thread_local std::string tCallbackError;
}  // namespace

void setCallbackError(const char* message) {
  tCallbackError = message;
}

std::string takeCallbackError() noexcept {
  std::string out;
  out.swap(tCallbackError);
  return out;
}

std::string callbackFailure(const std::string& fallback) {
  std::string own = takeCallbackError();
  return own.empty() ? fallback : own;
}

void copyText(const std::string& text, char* buffer, size_t size, size_t* length) noexcept {
  *length = text.size();
  if (size > 0) {
    const size_t n = std::min(size - 1, text.size());
    std::memcpy(buffer, text.data(), n);
    buffer[n] = '\0';
  }
}

int statusOf(const std::exception_ptr& error) noexcept {
  try {
    std::rethrow_exception(error);
  } catch (const RankShouldRestart& e) {
    setLastError(e.what());
    return RESILIENT_RESTART_SHOULD_RESTART;
  } catch (const RestartAbort& e) {
    setLastError(e.what());
    return RESILIENT_RESTART_ABORTED;
  } catch (const RankDiscarded& e) {
    setLastError(e.what());
    return RESILIENT_RESTART_DISCARDED;
  } catch (const RankNeedsNewProcess& e) {
    setLastError(e.what());
    return RESILIENT_RESTART_NEEDS_NEW_PROCESS;
  } catch (const HealthCheckError& e) {
    setLastError(e.what());
    return RESILIENT_RESTART_HEALTH_CHECK;
  } catch (const StoreUnavailable& e) {
    setLastError(e.what());
    return RESILIENT_RESTART_STORE_UNAVAILABLE;
  } catch (const TimeoutError& e) {
    setLastError(e.what());
    return RESILIENT_RESTART_TIMEOUT;
  } catch (const ConfigError& e) {
    setLastError(e.what());
    return RESILIENT_RESTART_CONFIG;
  } catch (const std::invalid_argument& e) {
    setLastError(e.what());
    return RESILIENT_RESTART_CONFIG;
  } catch (const HostCommunicatorError& e) {
    setLastError(e.what());
    return RESILIENT_RESTART_COMMUNICATOR;
  } catch (const std::exception& e) {
    setLastError(e.what());
    return RESILIENT_RESTART_ERROR;
  } catch (...) {
    setLastError("an exception that is not a std::exception");
    return RESILIENT_RESTART_ERROR;
  }
}

}  // namespace resilient::restart::capi

extern "C" const char* resilient_restart_version(void) {
  return RESILIENT_VERSION_STRING;
}

extern "C" const char* resilient_restart_last_error(void) {
  return resilient::restart::capi::lastError();
}

extern "C" const char* resilient_restart_status_name(int status) {
  switch (status) {
#define RESILIENT_STATUS_TEXT(ID, name, text) \
  case RESILIENT_RESTART_##ID: return text;
    RESILIENT_RESTART_STATUSES(RESILIENT_STATUS_TEXT)
#undef RESILIENT_STATUS_TEXT
    default: return "unknown status";
  }
}

extern "C" void resilient_restart_set_callback_error(const char* message) {
  try {
    resilient::restart::capi::takeCallbackError();
    if (message != nullptr) {
      resilient::restart::capi::setCallbackError(message);
    }
  } catch (...) {  // out of memory: the generic text stands
  }
}
