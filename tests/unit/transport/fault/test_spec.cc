#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "plugin/transport/fault/spec.h"

using namespace resilient;
using namespace resilient::transport::fault;

namespace {

std::vector<std::string> describeAll(const std::vector<FaultRule>& rules) {
  std::vector<std::string> out;
  out.reserve(rules.size());
  for (const FaultRule& rule : rules) {
    out.push_back(describe(rule));
  }
  return out;
}

}  // namespace

TEST_CASE("every documented form parses to its canonical rule", "[fault][spec]") {
  auto [spec, canonical] = GENERATE(table<std::string, std::string>({
      {"kind=stall", "kind=stall"},
      {"kind=stall,op=isend,after=100", "kind=stall,op=isend,after=100"},
      {"kind=close,dir=recv,at=2000", "kind=close,dir=recv,at=2000"},
      {"kind=error", "kind=error"},
      {"kind=error,error=remote", "kind=error"},
      {"kind=error,op=test,error=system", "kind=error,op=test,error=system"},
      {" kind = error , op = test , error = system ", "kind=error,op=test,error=system"},
      {"op=irecv,kind=delay,delay=5", "kind=delay,op=irecv,delay=5"},
      {"kind=delay,delay=1,at=0", "kind=delay,at=0,delay=1"},
      {"kind=slow,rate=100M", "kind=slow,rate=100000000"},
      {"kind=slow,rate=1.5G,dir=send", "kind=slow,dir=send,rate=1500000000"},
      {"kind=slow,rate=64k", "kind=slow,rate=64000"},
      {"kind=slow,rate=64K,op=irecv", "kind=slow,op=irecv,rate=64000"},
      {"kind=slow,rate=12345", "kind=slow,rate=12345"},
      {"kind=stall,op=connect,peer=10.0.0.2,duration=500",
       "kind=stall,op=connect,peer=10.0.0.2,duration=500"},
      {"kind=stall,op=accept", "kind=stall,op=accept"},
      {"kind=error,op=connect,dir=send", "kind=error,op=connect,dir=send"},
      {"kind=close,peer=[fe80::1]:4000", "kind=close,peer=[fe80::1]:4000"},
      {"kind=error,prob=0.25,seed=7", "kind=error,prob=0.25,seed=7"},
      {"kind=stall,prob=0", "kind=stall,prob=0"},
      {"kind=stall,prob=1", "kind=stall"},
      {"kind=stall,op=any,dir=any,after=0", "kind=stall"},
      {"kind=stall,duration=0", "kind=stall"},
      {"kind=close,op=test,after=3,duration=10", "kind=close,op=test,after=3,duration=10"},
  }));
  CAPTURE(spec);
  const Result<std::vector<FaultRule>> rules = parseFaultSpec(spec);
  REQUIRE(rules.ok());
  REQUIRE(rules->size() == 1);
  CHECK(describe(rules->front()) == canonical);

  // The canonical text parses back to the same rule.
  const Result<std::vector<FaultRule>> again = parseFaultSpec(canonical);
  REQUIRE(again.ok());
  REQUIRE(again->size() == 1);
  CHECK(describe(again->front()) == canonical);
}

TEST_CASE("a spec holds several rules separated by ';'", "[fault][spec]") {
  const auto rules =
      parseFaultSpec("kind=stall,op=isend,after=100; kind=close,dir=recv,at=2000;;\n");
  REQUIRE(rules.ok());
  CHECK(describeAll(*rules) ==
        std::vector<std::string>{"kind=stall,op=isend,after=100", "kind=close,dir=recv,at=2000"});
}

TEST_CASE("an empty or blank spec has no rules", "[fault][spec]") {
  const std::string spec = GENERATE(as<std::string>{}, "", " ", ";", " ; ;\t");
  CAPTURE(spec);
  const auto rules = parseFaultSpec(spec);
  REQUIRE(rules.ok());
  CHECK(rules->empty());
}

TEST_CASE("parsed fields carry the values and defaults", "[fault][spec]") {
  const auto rules = parseFaultSpec(
      "kind=slow,op=isend,dir=send,after=7,peer=10.0.0.3,duration=250,rate=2M,prob=0.5,seed=9");
  REQUIRE(rules.ok());
  const FaultRule& r = rules->front();
  CHECK(r.kind == FaultKind::kSlow);
  CHECK(r.op == FaultOp::kIsend);
  CHECK(r.dir == FaultDir::kSend);
  CHECK(r.after == 7);
  CHECK_FALSE(r.hasAt);
  CHECK(r.peer == "10.0.0.3");
  CHECK(r.durationMs == 250);
  CHECK(r.rateBytesPerS == 2000000);
  CHECK(r.prob == 0.5);
  CHECK(r.seed == 9);

  const auto defaults = parseFaultSpec("kind=error");
  REQUIRE(defaults.ok());
  const FaultRule& d = defaults->front();
  CHECK(d.op == FaultOp::kAny);
  CHECK(d.dir == FaultDir::kAny);
  CHECK(d.after == 0);
  CHECK_FALSE(d.hasAt);
  CHECK(d.peer.empty());
  CHECK(d.durationMs == 0);
  CHECK(d.prob == 1.0);
  CHECK(d.error == InjectedError::kRemote);
}

TEST_CASE("malformed rules are invalid usage quoting the rule and what is accepted",
          "[fault][spec]") {
  auto [spec, rule, expected] = GENERATE(table<std::string, std::string, std::string>({
      {"op=isend", "op=isend", "missing kind; accepted: kind=stall, error, close, delay, slow"},
      {"kind=stal", "kind=stal", "unknown kind 'stal'; accepted: stall, error, close, delay, slow"},
      {"kind=stall,foo=1", "kind=stall,foo=1", "unknown key 'foo'; accepted keys: kind, op"},
      {"kind=stall,Kind=error", "kind=stall,Kind=error", "unknown key 'Kind'"},
      {"kindstall", "kindstall", "'kindstall' is not key=value"},
      {"kind=stall,,op=isend", "kind=stall,,op=isend", "'' is not key=value"},
      {"kind=stall,after=abc", "kind=stall,after=abc", "bad number 'abc' for after; accepted"},
      {"kind=stall,after=-1", "kind=stall,after=-1", "bad number '-1' for after"},
      {"kind=stall,after=", "kind=stall,after=", "bad number '' for after"},
      {"kind=stall,after=1.5", "kind=stall,after=1.5", "bad number '1.5' for after"},
      {"kind=stall,after=99999999999999999999", "kind=stall,after=99999999999999999999",
       "bad number"},
      {"kind=stall,at=1000000000001", "kind=stall,at=1000000000001",
       "bad number '1000000000001' for at; accepted: milliseconds"},
      {"kind=stall,duration=x", "kind=stall,duration=x", "bad number 'x' for duration"},
      {"kind=stall,seed=x,prob=1", "kind=stall,seed=x,prob=1", "bad number 'x' for seed"},
      {"kind=stall,after=1,at=2", "kind=stall,after=1,at=2", "after and at both given"},
      {"kind=stall,rate=1M", "kind=stall,rate=1M", "rate applies only to kind=slow"},
      {"kind=slow", "kind=slow", "kind=slow needs rate="},
      {"kind=slow,rate=0", "kind=slow,rate=0", "bad rate '0'; accepted: bytes per second"},
      {"kind=slow,rate=10X", "kind=slow,rate=10X", "bad rate '10X'"},
      {"kind=slow,rate=M", "kind=slow,rate=M", "bad rate 'M'"},
      {"kind=slow,rate=-5k", "kind=slow,rate=-5k", "bad rate '-5k'"},
      {"kind=delay", "kind=delay", "kind=delay needs delay=MS"},
      {"kind=delay,delay=0", "kind=delay,delay=0", "bad number '0' for delay"},
      {"kind=stall,delay=5", "kind=stall,delay=5", "delay applies only to kind=delay"},
      {"kind=stall,error=system", "kind=stall,error=system", "error applies only to kind=error"},
      {"kind=error,error=fatal", "kind=error,error=fatal",
       "unknown error 'fatal'; accepted: remote, system"},
      {"kind=stall,prob=1.5", "kind=stall,prob=1.5", "bad probability '1.5'; accepted"},
      {"kind=stall,prob=-0.1", "kind=stall,prob=-0.1", "bad probability"},
      {"kind=stall,prob=nan", "kind=stall,prob=nan", "bad probability"},
      {"kind=stall,prob=half", "kind=stall,prob=half", "bad probability"},
      {"kind=stall,seed=3", "kind=stall,seed=3", "seed applies only together with prob"},
      {"kind=stall,op=send", "kind=stall,op=send",
       "unknown op 'send'; accepted: isend, irecv, test, connect, accept, any"},
      {"kind=stall,dir=both", "kind=stall,dir=both", "unknown dir 'both'; accepted: send, recv"},
      {"kind=stall,op=isend,dir=recv", "kind=stall,op=isend,dir=recv",
       "op=isend and dir=recv conflict"},
      {"kind=stall,op=accept,dir=send", "kind=stall,op=accept,dir=send",
       "op=accept and dir=send conflict"},
      {"kind=delay,delay=5,op=test", "kind=delay,delay=5,op=test",
       "kind=delay acts on requests; accepted ops: isend, irecv, any"},
      {"kind=slow,rate=1M,op=connect", "kind=slow,rate=1M,op=connect",
       "kind=slow acts on requests"},
      {"kind=nosizes,op=test", "kind=nosizes,op=test", "kind=nosizes acts on requests"},
      {"kind=stall,kind=error", "kind=stall,kind=error", "key 'kind' given twice"},
      {"kind=stall,peer=", "kind=stall,peer=", "empty value for peer"},
      {"kind=stall;op=isend", "op=isend", "missing kind"},
      {"kind=stall,op=isend ; kind=close,dir=up", "kind=close,dir=up", "unknown dir 'up'"},
  }));
  CAPTURE(spec);
  const Result<std::vector<FaultRule>> rules = parseFaultSpec(spec);
  REQUIRE_FALSE(rules.ok());
  const Status s = rules.status();
  CHECK(s.kind() == ErrorKind::kInvalidUsage);
  CAPTURE(s.message());
  CHECK(s.message().find("fault spec: rule '" + rule + "': ") == 0);
  CHECK(s.message().find(expected) != std::string::npos);
}

TEST_CASE("a spec is limited to 64 rules", "[fault][spec]") {
  std::string spec;
  for (size_t i = 0; i < kMaxFaultRules; ++i) {
    spec += "kind=stall;";
  }
  REQUIRE(parseFaultSpec(spec).ok());
  spec += "kind=error";
  const auto rules = parseFaultSpec(spec);
  REQUIRE_FALSE(rules.ok());
  CHECK(rules.status().kind() == ErrorKind::kInvalidUsage);
  CHECK(rules.status().message().find("more than 64 rules") != std::string::npos);
}
