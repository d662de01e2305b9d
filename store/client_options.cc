#include "store/client_options.h"

#include <unistd.h>

#include "common/params.h"

namespace resilient::store {

ClientOptions ClientOptions::fromParams() {
  const config::Params& p = config::Params::global();
  ClientOptions o;
  o.token = p.get<config::kJobToken>();
  o.defaultTimeout = Millis(p.get<config::kStoreTimeoutMs>());
  o.connectTimeout = Millis(p.get<config::kStoreConnectTimeoutMs>());
  o.reconnectTimeout = Millis(p.get<config::kStoreReconnectTimeoutMs>());
  o.memberTimeout = Millis(p.get<config::kStoreMemberTimeoutMs>());
  o.name = defaultClientName();
  return o;
}

std::string defaultClientName() {
  char host[256] = {0};
  if (::gethostname(host, sizeof host - 1) != 0) {
    host[0] = '?';
  }
  return std::string(host) + ":" + std::to_string(::getpid());
}

}  // namespace resilient::store
