// The backends the conformance suite runs against. Each test binary
// registers its own (memory and tcp in test-store; etcd 1- and 3-member
// clusters in test-store-etcd) with a static Registration; the suite
// GENERATEs over backendNames().
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "store/store.h"

namespace resilient::test {

struct Backend {
  std::string name;
  // A new client of the backend's one shared store (started on first use).
  std::function<std::shared_ptr<store::Store>()> connect;
};

std::vector<Backend>& backends();
std::vector<std::string> backendNames();
const Backend& backend(const std::string& name);

struct BackendRegistration {
  explicit BackendRegistration(Backend b) { backends().push_back(std::move(b)); }
};

// One test's view of a backend: every client it makes sees the same fresh
// key prefix, so tests never see each other's keys or barriers.
class StoreContext {
 public:
  explicit StoreContext(const std::string& backendName);
  // A new client (own connection where the backend has connections).
  std::shared_ptr<store::Store> client();
  // The first client.
  store::Store& store() { return *first_; }
  const std::string& prefix() const { return prefix_; }

 private:
  const Backend& backend_;
  std::string prefix_;
  std::shared_ptr<store::Store> first_;
};

}  // namespace resilient::test
