#include "tests/unit/store/backends.h"

#include <unistd.h>

#include <atomic>
#include <stdexcept>

#include "store/prefix_view.h"

namespace resilient::test {

std::vector<Backend>& backends() {
  static std::vector<Backend> all;
  return all;
}

std::vector<std::string> backendNames() {
  std::vector<std::string> names;
  for (const auto& b : backends()) {
    names.push_back(b.name);
  }
  return names;
}

const Backend& backend(const std::string& name) {
  for (const auto& b : backends()) {
    if (b.name == name) {
      return b;
    }
  }
  throw std::runtime_error("no backend " + name);
}

StoreContext::StoreContext(const std::string& backendName) : backend_(backend(backendName)) {
  static std::atomic<int> counter{0};
  prefix_ = "test/" + std::to_string(::getpid()) + "/" + std::to_string(counter++) + "/";
  first_ = client();
}

std::shared_ptr<store::Store> StoreContext::client() {
  return std::make_shared<store::PrefixView>(backend_.connect(), prefix_);
}

}  // namespace resilient::test
