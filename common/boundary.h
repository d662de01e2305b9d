// The noexcept guard every C entry point of a plugin runs its body in.
//
//   extern "C" ncclResult_t pluginIsend(...) noexcept {
//     return resilient::boundary::call("isend", [&] { return core.isend(...); });
//   }
//
// The body returns a Status (translated by toNcclResult) or an ncclResult_t.
// Any exception becomes an error code plus exactly one WARN naming the entry
// point: std::bad_alloc -> ncclSystemError, anything else -> ncclInternalError.
// ncclInProgress is never let through (NCCL would take it for success).
#pragma once

#include <exception>
#include <new>
#include <type_traits>

#include "nccl/result.h"
#include "common/status.h"

namespace resilient::boundary {

// Logs the one WARN for an exception caught at `entry` and returns `code`.
ncclResult_t reportException(const char* entry, const char* what, ncclResult_t code) noexcept;
// Logs a WARN for a body that returned ncclInProgress and returns ncclInternalError.
ncclResult_t reportInProgress(const char* entry) noexcept;

template <class Body>
ncclResult_t call(const char* entry, Body&& body) noexcept {
  try {
    ncclResult_t result;
    if constexpr (std::is_same_v<std::invoke_result_t<Body>, Status>) {
      result = toNcclResult(body());
    } else {
      static_assert(std::is_same_v<std::invoke_result_t<Body>, ncclResult_t>,
                    "a boundary body returns Status or ncclResult_t");
      result = body();
    }
    if (result == ncclInProgress) {
      return reportInProgress(entry);
    }
    return result;
  } catch (const std::bad_alloc&) {
    return reportException(entry, "out of memory", ncclSystemError);
  } catch (const std::exception& e) {
    return reportException(entry, e.what(), ncclInternalError);
  } catch (...) {
    return reportException(entry, "unknown exception", ncclInternalError);
  }
}

}  // namespace resilient::boundary
