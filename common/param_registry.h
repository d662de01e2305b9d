// The shape of an NCCL_RESILIENT_* knob and the registry of all of them.
//
// A knob is one typed constant, declared once in common/knobs.h: a Knob<T>
// holding its ParamSpec (name, default, range, fallback, one-line doc), where T
// is what reading it returns (int64_t, bool, std::string or an enum), so its
// ParamType comes from T and cannot disagree with it. kAllKnobs (knobs.h) lists
// them in documentation order; registry() is that list as ParamSpec rows, which
// Params resolves and docs/configuration.md is generated from (a test fails
// when the two drift). Params::get<kSomeKnob>() (params.h) returns a T, and
// does not compile for a knob missing from kAllKnobs.
//
// To add a knob: declare it in knobs.h and add it to kAllKnobs where it belongs
// in the documentation, then regenerate docs/configuration.md.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>

namespace resilient::config {

enum class ParamType {
  kBool,    // 0/1, true/false, yes/no, on/off (any case)
  kInt,     // integer (decimal, 0x hex or 0 octal, as NCCL parses) within [min, max]
  kEnum,    // one of `choices` (any case); the value is its index
  kString,  // any text, or what `validate` accepts
};

struct ParamSpec {
  const char* name = nullptr;                    // full variable name, NCCL_RESILIENT_...
  ParamType type = ParamType::kString;           // set by the Knob<T> holding the spec
  const char* defaultValue = "";                 // textual, parsed like user input
  int64_t min = 0;                               // kInt only
  int64_t max = 0;                               // kInt only
  const char* unit = "";                         // kInt: "ms", "bytes", ... (docs and warnings)
  const char* choices = "";                      // kEnum: names separated by '|'
  const char* inherits = nullptr;                // NCCL variable used when ours is unset
  bool (*validate)(std::string_view) = nullptr;  // kString: optional check
  const char* accepted = "";  // kString with validate: what it accepts, for humans
  const char* doc = "";       // one line
};

namespace detail {

template <class T>
consteval ParamType paramTypeOf() {
  if constexpr (std::is_same_v<T, bool>) {
    return ParamType::kBool;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    return ParamType::kInt;
  } else if constexpr (std::is_same_v<T, std::string>) {
    return ParamType::kString;
  } else {
    static_assert(std::is_enum_v<T>, "a knob reads as int64_t, bool, std::string or an enum");
    return ParamType::kEnum;
  }
}

consteval bool startsWith(const char* text, std::string_view prefix) {
  return text != nullptr && std::string_view(text).substr(0, prefix.size()) == prefix;
}

consteval bool isEmpty(const char* text) {
  return text == nullptr || text[0] == '\0';
}

// Fails the constant evaluation (so the build) when a row does not fit its type.
consteval ParamSpec checked(ParamSpec spec, ParamType type) {
  spec.type = type;
  if (!startsWith(spec.name, "NCCL_RESILIENT_") || isEmpty(spec.doc)) {
    throw "a knob needs an NCCL_RESILIENT_* name and a doc line";
  }
  if (type == ParamType::kInt ? spec.min > spec.max
                              : spec.min != 0 || spec.max != 0 || !isEmpty(spec.unit)) {
    throw "min, max and unit belong to integer knobs, with min <= max";
  }
  if ((type == ParamType::kEnum) == isEmpty(spec.choices)) {
    throw "choices belong to enum knobs, which need them";
  }
  if (type != ParamType::kString && (spec.validate != nullptr || !isEmpty(spec.accepted))) {
    throw "validate and accepted belong to string knobs";
  }
  return spec;
}

}  // namespace detail

// One knob: its spec, and T, the type Params::get returns for it (an enum
// knob's enumerators are its choices, in order).
template <class T>
class Knob {
 public:
  using Value = T;
  // What Params::get returns: T, or a reference to the resolved text.
  using Read = std::conditional_t<std::is_same_v<T, std::string>, const std::string&, T>;

  consteval explicit Knob(const ParamSpec& spec)
      : spec_(detail::checked(spec, detail::paramTypeOf<T>())) {}

  constexpr const ParamSpec& spec() const noexcept { return spec_; }

 private:
  ParamSpec spec_;
};

using IntKnob = Knob<int64_t>;
using BoolKnob = Knob<bool>;
using StringKnob = Knob<std::string>;
template <class E>
requires std::is_enum_v<E>
using EnumKnob = Knob<E>;

// The specs of `knobs`, in order; a name given twice fails the build.
template <class... T>
consteval std::array<const ParamSpec*, sizeof...(T)> listKnobs(const Knob<T>&... knobs) {
  std::array<const ParamSpec*, sizeof...(T)> list{&knobs.spec()...};
  for (size_t i = 0; i < list.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (std::string_view(list[i]->name) == list[j]->name) {
        throw "two knobs of the list have one name";
      }
    }
  }
  return list;
}

// Every knob of kAllKnobs (knobs.h) as a row, in documentation order.
std::span<const ParamSpec> registry() noexcept;

}  // namespace resilient::config
