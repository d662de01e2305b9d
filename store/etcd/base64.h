// Base64 (RFC 4648, standard alphabet, padded): how etcd's JSON gateway
// carries keys and values, which are bytes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace resilient::store::etcd {

std::string base64Encode(std::string_view bytes);
// nullopt when `text` is not valid padded base64.
std::optional<std::string> base64Decode(std::string_view text);

}  // namespace resilient::store::etcd
