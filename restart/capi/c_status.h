// The C API's error translation: every entry point runs its body through
// guarded(), which turns whatever the C++ side throws into a status and keeps
// the message for resilient_restart_last_error() (per thread).
#pragma once

#include <cstddef>
#include <exception>
#include <string>

#include "resilient/restart.h"

namespace resilient::restart::capi {

int statusOf(const std::exception_ptr& error) noexcept;
void setLastError(const std::string& message) noexcept;
const char* lastError() noexcept;
void setCallbackError(const char* message);
// resilient_restart_set_callback_error's message (empty: none), cleared.
std::string takeCallbackError() noexcept;
// The callback's own message, or `fallback`; clears it.
std::string callbackFailure(const std::string& fallback);

// The C API's way to return text: *length = its length without the NUL; as
// much as fits into `buffer` of `size` bytes, NUL-terminated (size 0: none).
void copyText(const std::string& text, char* buffer, size_t size, size_t* length) noexcept;

template <class F>
int guarded(F&& body) noexcept {
  try {
    setLastError("");
    return body();
  } catch (...) {
    return statusOf(std::current_exception());
  }
}

}  // namespace resilient::restart::capi
