// The text of an exception the loop caught (its what(), or a placeholder for
// one that is not a std::exception): what fault records, the timeline and
// the barrier's "left" marks say.
#pragma once

#include <exception>
#include <string>

namespace resilient::restart {

std::string describeException(const std::exception_ptr& e);

}  // namespace resilient::restart
