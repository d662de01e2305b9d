// The post-mortem dump: its path, and its content with and without a blackbox.
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "blackbox/writer.h"
#include "restart/monitor/post_mortem.h"
#include "tests/support/temp_dir.h"

namespace rm = resilient::restart::monitor;

namespace {

nlohmann::json readJson(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return nlohmann::json::parse(s.str());
}

}  // namespace

TEST_CASE("the dump goes next to the log file", "[monitor][postmortem]") {
  CHECK(rm::postMortemPath("/var/log/job/monitor-3.log", "/dev/shm", 3, 1234) ==
        "/var/log/job/resilient-monitor-3-1234.postmortem.json");
  CHECK(rm::postMortemPath("", "/dev/shm", 3, 1234) ==
        "/dev/shm/resilient-monitor-3-1234.postmortem.json");
}

TEST_CASE("the dump holds the rank's blackbox as resilient-inspect renders it",
          "[monitor][postmortem]") {
  resilient::test::TempDir dir;
  auto writer = resilient::blackbox::Writer::create(dir.path().string(), "testhost");
  REQUIRE(writer.ok());
  resilient_blackbox_fault fault{};
  fault.faultClass = RESILIENT_BLACKBOX_FAULT_PEER_EXITED;
  std::snprintf(fault.text, sizeof fault.text, "peer 7 went away");
  writer.value()->recordFault(fault);

  rm::PostMortem pm;
  pm.rank = 2;
  pm.pid = ::getpid();  // this process wrote the region
  pm.iteration = 4;
  pm.phase = "running";
  pm.reason = "terminated";
  pm.detail = "process ended";
  const std::string path = (dir.path() / "dump.json").string();
  const std::string summary = rm::writePostMortem(pm, dir.path().string(), path);
  CHECK(summary.find("1 faults") != std::string::npos);
  const auto j = readJson(path);
  CHECK(j["rank"] == 2);
  CHECK(j["iteration"] == 4);
  CHECK(j["reason"] == "terminated");
  CHECK(j["blackbox"]["host"] == "testhost");
  REQUIRE(j["blackbox"]["faults"].size() == 1);
  CHECK(j["blackbox"]["faults"][0]["class"] == "peer process exited");
  CHECK(j["blackbox"]["faults"][0]["text"] == "peer 7 went away");
}

TEST_CASE("every fault class the plugins record has its one name in the dump",
          "[monitor][postmortem]") {
  const std::vector<std::pair<uint32_t, std::string>> classes = {
      {RESILIENT_BLACKBOX_FAULT_TRANSPORT_ERROR, "transport error"},
      {RESILIENT_BLACKBOX_FAULT_PEER_EXITED, "peer process exited"},
      {RESILIENT_BLACKBOX_FAULT_PEER_UNRESPONSIVE, "peer unresponsive"},
      {RESILIENT_BLACKBOX_FAULT_PEER_STUCK, "peer stuck"},
      {RESILIENT_BLACKBOX_FAULT_ABORTED, "aborted"},
      {RESILIENT_BLACKBOX_FAULT_LOCAL_ERROR, "local error"},
      {RESILIENT_BLACKBOX_FAULT_COLL_HUNG, "collective hung"},
      {RESILIENT_BLACKBOX_FAULT_PROGRESS_SILENT, "progress silent"},
      {RESILIENT_BLACKBOX_FAULT_LINK_DOWN, "link down"},
  };
  resilient::test::TempDir dir;
  auto writer = resilient::blackbox::Writer::create(dir.path().string(), "testhost");
  REQUIRE(writer.ok());
  for (const auto& [cls, name] : classes) {
    resilient_blackbox_fault fault{};
    fault.faultClass = cls;
    writer.value()->recordFault(fault);
  }
  rm::PostMortem pm;
  pm.pid = ::getpid();
  const std::string path = (dir.path() / "dump.json").string();
  rm::writePostMortem(pm, dir.path().string(), path);
  const auto j = readJson(path);
  REQUIRE(j["blackbox"]["faults"].size() == classes.size());
  for (size_t i = 0; i < classes.size(); ++i) {
    CHECK(j["blackbox"]["faults"][i]["class"] == classes[i].second);
  }
}

TEST_CASE("without a blackbox the dump says why", "[monitor][postmortem]") {
  resilient::test::TempDir dir;
  rm::PostMortem pm;
  pm.rank = 0;
  pm.pid = 999999999;
  const std::string path = (dir.path() / "dump.json").string();
  CHECK(rm::writePostMortem(pm, dir.path().string(), path).find("no blackbox") == 0);
  const auto j = readJson(path);
  CHECK(j["blackbox"].is_null());
  CHECK_FALSE(j["blackbox_error"].get<std::string>().empty());
}

TEST_CASE("an unwritable dump path is an error naming it", "[monitor][postmortem]") {
  rm::PostMortem pm;
  CHECK_THROWS_WITH(rm::writePostMortem(pm, "/nonexistent", "/nonexistent/dir/d.json"),
                    Catch::Contains("/nonexistent/dir/d.json"));
}

TEST_CASE("a link planted at the dump's name is replaced, its target untouched",
          "[monitor][postmortem]") {
  // Issue 19 finding 2: the dump goes to the blackbox directory (/dev/shm by
  // default, world-writable) under a predictable name.
  resilient::test::TempDir dir;
  const std::string victim = (dir.path() / "victim.txt").string();
  { std::ofstream(victim) << "precious"; }
  const std::string path = rm::postMortemPath("", dir.path().string(), 1, 999);
  REQUIRE(::symlink(victim.c_str(), path.c_str()) == 0);
  rm::PostMortem pm;
  pm.rank = 1;
  pm.pid = 999;
  (void)rm::writePostMortem(pm, dir.path().string(), path);
  std::ifstream in(victim);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text == "precious");
  CHECK(readJson(path)["rank"] == 1);  // the dump is a file of its own now
}
