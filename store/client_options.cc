#include "store/client_options.h"

#include <unistd.h>

#include "common/params.h"

namespace resilient::store {

ClientOptions ClientOptions::fromParams() {
  using config::Param;
  const config::Params& p = config::Params::global();
  ClientOptions o;
  o.token = p.string(Param::kJobToken);
  o.defaultTimeout = Millis(p.integer(Param::kStoreTimeoutMs));
  o.connectTimeout = Millis(p.integer(Param::kStoreConnectTimeoutMs));
  o.reconnectTimeout = Millis(p.integer(Param::kStoreReconnectTimeoutMs));
  o.memberTimeout = Millis(p.integer(Param::kStoreMemberTimeoutMs));
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
