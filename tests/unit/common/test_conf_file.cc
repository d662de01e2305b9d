#include <string>

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include "common/conf_file.h"
#include "tests/support/temp_dir.h"

using namespace resilient::config;

namespace {

const ConfEntry* find(const ConfFile& f, const std::string& name) {
  for (const ConfEntry& e : f.entries) {
    if (e.name == name) {
      return &e;
    }
  }
  return nullptr;
}

}  // namespace

TEST_CASE("conf files: comments, blank lines, spaces and CRLF", "[common][conf]") {
  const ConfFile f = parseConf(
      "# a comment\n"
      "\n"
      "   \t\n"
      "  # an indented comment\n"
      "NCCL_DEBUG=INFO\n"
      "  NCCL_RESILIENT_LOG_LEVEL =  TRACE  \r\n"
      "NCCL_SOCKET_IFNAME==ens1f0\r\n"
      "EMPTY_VALUE=\n"
      "LAST_LINE_WITHOUT_NEWLINE=1",
      "test.conf");
  CHECK(f.diagnostics.empty());
  REQUIRE(f.entries.size() == 5);
  CHECK(find(f, "NCCL_DEBUG")->value == "INFO");
  CHECK(find(f, "NCCL_DEBUG")->line == 5);
  CHECK(find(f, "NCCL_RESILIENT_LOG_LEVEL")->value == "TRACE");
  // Only the first '=' separates: NCCL's own documented example.
  CHECK(find(f, "NCCL_SOCKET_IFNAME")->value == "=ens1f0");
  CHECK(find(f, "EMPTY_VALUE")->value.empty());
  CHECK(find(f, "LAST_LINE_WITHOUT_NEWLINE")->value == "1");
}

TEST_CASE("conf files: the first occurrence of a name wins, as in NCCL", "[common][conf]") {
  const ConfFile f = parseConf("A=1\nB=2\nA=3\n", "dup.conf");
  REQUIRE(f.entries.size() == 2);
  CHECK(find(f, "A")->value == "1");
  CHECK(f.diagnostics.empty());
}

TEST_CASE("conf files: malformed lines are reported with their line number and skipped",
          "[common][conf]") {
  const ConfFile f = parseConf(
      "GOOD=1\n"
      "no equals sign here\n"
      "=value without a name\n"
      "BAD NAME=x\n"
      "9STARTS_WITH_DIGIT=1\n"
      "NAME-WITH-DASH=1\n"
      "ALSO_GOOD = 2\n" +
          std::string("LONG=") + std::string(1024, 'v') + "\n",
      "bad.conf");
  REQUIRE(f.entries.size() == 2);
  CHECK(find(f, "GOOD") != nullptr);
  CHECK(find(f, "ALSO_GOOD")->value == "2");
  REQUIRE(f.diagnostics.size() == 6);
  CHECK(f.diagnostics[0] == "bad.conf:2: ignored line without '=': \"no equals sign here\"");
  CHECK(f.diagnostics[1].rfind("bad.conf:3: ignored line with an invalid variable name", 0) == 0);
  CHECK(f.diagnostics[2].rfind("bad.conf:4:", 0) == 0);
  CHECK(f.diagnostics[3].rfind("bad.conf:5:", 0) == 0);
  CHECK(f.diagnostics[4].rfind("bad.conf:6:", 0) == 0);
  CHECK(f.diagnostics[5].rfind("bad.conf:8: ignored LONG: name or value longer than 1023", 0) == 0);
}

TEST_CASE("conf files: binary garbage never crashes the parser", "[common][conf]") {
  std::string garbage;
  for (int i = 0; i < 4096; ++i) {
    garbage += static_cast<char>((i * 131 + 7) % 256);
  }
  const ConfFile f = parseConf(garbage, "garbage.conf");
  for (const ConfEntry& e : f.entries) {
    CHECK_FALSE(e.name.empty());
  }
  SUCCEED("parsed " << f.entries.size() << " entries, " << f.diagnostics.size() << " diagnostics");
}

TEST_CASE("reading conf files from disk", "[common][conf]") {
  resilient::test::TempDir dir;
  SECTION("a missing file is not an error") {
    CHECK_FALSE(readConf((dir.path() / "absent.conf").string()).has_value());
  }
  SECTION("an existing file is parsed") {
    const std::string path = dir.write("nccl.conf", "X=1\r\nY = two\n");
    const auto f = readConf(path);
    REQUIRE(f.has_value());
    CHECK(f->path == path);
    CHECK(f->entries.size() == 2);
  }
  SECTION("a directory is reported, not parsed") {
    const auto f = readConf(dir.path().string());
    REQUIRE(f.has_value());
    CHECK(f->entries.empty());
    REQUIRE(f->diagnostics.size() == 1);
    CHECK(f->diagnostics[0].find("not a regular file (a directory): ignored") != std::string::npos);
  }
  SECTION("a FIFO is refused at once, not waited on") {
    // Issue 19 finding 3: NCCL_CONF_FILE naming a FIFO blocked the plugin's
    // init (and resilient-config) forever.
    const std::string fifo = (dir.path() / "fifo.conf").string();
    REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
    const auto f = readConf(fifo);
    REQUIRE(f.has_value());
    CHECK(f->entries.empty());
    REQUIRE(f->diagnostics.size() == 1);
    CHECK(f->diagnostics[0] == fifo + ": not a regular file (a FIFO): ignored");
  }
  SECTION("/dev/null is an empty configuration, not an error") {
    // Issue 19 finding 3: "cannot read: Success", and resilient-config exited 1.
    const auto f = readConf("/dev/null");
    REQUIRE(f.has_value());
    CHECK(f->entries.empty());
    CHECK(f->diagnostics.empty());
  }
}

TEST_CASE("conf files: control bytes never reach the log raw", "[common][conf]") {
  // Issue 19 finding 3: a binary conf file's bytes were echoed into the log.
  const ConfFile f = parseConf(std::string("\x1b[31mred\x07\n"), "bin.conf");
  REQUIRE(f.diagnostics.size() == 1);
  CHECK(f.diagnostics[0] == "bin.conf:1: ignored line without '=': \"\\x1b[31mred\\x07\"");
}
