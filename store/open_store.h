// Opens a store from its URL, the form a launcher passes to every rank:
//   tcp://host:port                the embedded TCP store
//   etcd://host:port[,host:port]   an etcd v3 cluster (members tried in turn)
//   memory                         a new in-process store (tests)
// Any URL may end in "/some/prefix/": the store is then a PrefixView.
#pragma once

#include <memory>
#include <string_view>

#include "store/client_options.h"
#include "store/store.h"

namespace resilient::store {

std::shared_ptr<Store> openStore(std::string_view url, const ClientOptions& options);

// True when this build has the etcd backend (libcurl was found).
bool haveEtcdBackend() noexcept;

}  // namespace resilient::store
