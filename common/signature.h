// The parameters of a function pointer type, R (*)(Args...): how code that
// serves several versions of a C ABI table (NCCL's net, CollNet and
// profiler structs) reads each member's signature off the version's own
// declaration instead of restating it per version.
#pragma once

#include <cstddef>
#include <tuple>

namespace resilient {

template <class Fn>
struct Signature;
template <class R, class... Args>
struct Signature<R (*)(Args...)> {
  static constexpr size_t kArity = sizeof...(Args);
  template <size_t I>
  using Param = std::tuple_element_t<I, std::tuple<Args...>>;
};

}  // namespace resilient
