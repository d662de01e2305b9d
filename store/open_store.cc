#include "store/open_store.h"

#include "common/net/socket.h"
#include "store/errors.h"
#include "store/memory_store.h"
#include "store/prefix_view.h"
#include "store/tcp/client.h"
#if defined(RESILIENT_HAVE_ETCD_STORE)
#include "store/etcd/etcd_store.h"
#endif

namespace resilient::store {

bool haveEtcdBackend() noexcept {
#if defined(RESILIENT_HAVE_ETCD_STORE)
  return true;
#else
  return false;
#endif
}

std::shared_ptr<Store> openStore(std::string_view url, const ClientOptions& options) {
  const size_t schemeEnd = url.find("://");
  const std::string_view scheme =
      schemeEnd == std::string_view::npos ? url : url.substr(0, schemeEnd);
  std::string_view rest =
      schemeEnd == std::string_view::npos ? std::string_view() : url.substr(schemeEnd + 3);
  std::string prefix;
  if (const size_t slash = rest.find('/'); slash != std::string_view::npos) {
    prefix = std::string(rest.substr(slash + 1));
    rest = rest.substr(0, slash);
  }
  std::shared_ptr<Store> store;
  if (scheme == "memory") {
    store = std::make_shared<MemoryStore>(options.defaultTimeout);
  } else if (scheme == "tcp") {
    const HostPort hp = valueOrThrow(parseHostPort(rest));
    store = std::make_shared<tcp::TcpStoreClient>(hp.host, hp.port, options);
  } else if (scheme == "etcd") {
#if defined(RESILIENT_HAVE_ETCD_STORE)
    std::vector<std::string> endpoints;
    size_t pos = 0;
    while (pos <= rest.size()) {
      const size_t comma = std::min(rest.find(',', pos), rest.size());
      if (comma > pos) {
        endpoints.emplace_back(rest.substr(pos, comma - pos));
      }
      pos = comma + 1;
    }
    store = std::make_shared<etcd::EtcdStore>(endpoints, options);
#else
    throw InvalidArgument("this build has no etcd store backend (libcurl was not found)");
#endif
  } else {
    throw InvalidArgument("unknown store URL '" + std::string(url) +
                          "': expected tcp://host:port, etcd://host:port[,host:port] or memory");
  }
  if (!prefix.empty()) {
    store = std::make_shared<PrefixView>(std::move(store), std::move(prefix));
  }
  return store;
}

}  // namespace resilient::store
