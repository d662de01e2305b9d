#include "restart/loop/text/exception_text.h"

namespace resilient::restart {

std::string describeException(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return ex.what();
  } catch (...) {
    return "an exception that is not a std::exception";
  }
}

}  // namespace resilient::restart
