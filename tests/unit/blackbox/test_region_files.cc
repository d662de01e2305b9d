// The blackbox's region files in a directory others may write (issue 19
// finding 2): a symbolic link, a second link, another user's file or a FIFO
// planted at a region's predictable name is refused -- nothing is truncated,
// overwritten, handed over or blocked on -- and a stale file of our own is
// replaced by a new one, never rewritten in place.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "blackbox/reader.h"
#include "blackbox/writer.h"
#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;
using namespace resilient;

namespace {

blackbox::Layout smallLayout() {
  blackbox::Layout l;
  l.flightOps = 8;
  return l;
}

std::string regionIn(const test::TempDir& dir) {
  return blackbox::regionPath(dir.path().string(), static_cast<uint32_t>(getpid()));
}

void writeFile(const fs::path& path, const std::string& text) {
  std::ofstream(path) << text;
}

std::string readFile(const fs::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

uint64_t elapsedMs(std::chrono::steady_clock::time_point start) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now() - start)
                                   .count());
}

}  // namespace

TEST_CASE("a symbolic link at the region's name is refused; its target is untouched",
          "[blackbox][files]") {
  test::TempDir dir;
  const fs::path victim = dir.path() / "victim.txt";
  writeFile(victim, "precious");
  fs::create_symlink(victim, regionIn(dir));
  auto w = blackbox::Writer::create(dir.path().string(), "h", smallLayout());
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().message().find("is a symbolic link") != std::string::npos);
  CHECK(readFile(victim) == "precious");
  CHECK(fs::file_size(victim) == 8);
  // Readers refuse it too.
  auto r = blackbox::readRegion(regionIn(dir));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("symbolic link") != std::string::npos);
}

TEST_CASE("a second link to another file at the region's name is refused", "[blackbox][files]") {
  test::TempDir dir;
  const fs::path victim = dir.path() / "victim.txt";
  writeFile(victim, "precious");
  fs::create_hard_link(victim, regionIn(dir));
  auto w = blackbox::Writer::create(dir.path().string(), "h", smallLayout());
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().message().find("has 2 links") != std::string::npos);
  CHECK(readFile(victim) == "precious");
}

TEST_CASE("a planted regular file is replaced by a new region, not rewritten",
          "[blackbox][files]") {
  test::TempDir dir;
  const std::string path = regionIn(dir);
  writeFile(path, std::string(100000, 'x'));
  const int planted = ::open(path.c_str(), O_RDONLY);  // keeps the planted file readable
  REQUIRE(planted >= 0);
  {
    auto w = blackbox::Writer::create(dir.path().string(), "h", smallLayout());
    REQUIRE(w.ok());
    // The planted file was unlinked, its bytes untouched; the region is a new file.
    struct stat old {};
    REQUIRE(fstat(planted, &old) == 0);
    CHECK(old.st_nlink == 0);
    CHECK(old.st_size == 100000);
    char first = 0;
    CHECK(::pread(planted, &first, 1, 0) == 1);
    CHECK(first == 'x');
    ::close(planted);
    struct stat after {};
    REQUIRE(stat(path.c_str(), &after) == 0);
    CHECK((after.st_mode & 0777) == 0600);
    auto snap = blackbox::readRegion(path);
    REQUIRE(snap.ok());
    CHECK(snap->header.attachCount == 1);
  }
  CHECK_FALSE(fs::exists(path));  // a clean finish removes it
}

TEST_CASE("a FIFO at the region's name blocks neither the writer nor a reader",
          "[blackbox][files]") {
  test::TempDir dir;
  const std::string path = regionIn(dir);
  REQUIRE(mkfifo(path.c_str(), 0600) == 0);
  const auto start = std::chrono::steady_clock::now();
  auto w = blackbox::Writer::create(dir.path().string(), "h", smallLayout());
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().message().find("not a regular file") != std::string::npos);
  auto r = blackbox::readRegion(path);
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().message().find("not a regular file") != std::string::npos);
  auto watch = blackbox::RegionWatch::open(path);
  CHECK_FALSE(watch.ok());
  CHECK(elapsedMs(start) < 2000);
}

TEST_CASE("another user's file at the region's name is refused", "[blackbox][files]") {
  if (geteuid() != 0) {
    WARN("needs root to plant another user's file: not checked");
    return;
  }
  test::TempDir dir;
  const std::string path = regionIn(dir);
  writeFile(path, "theirs");
  REQUIRE(chown(path.c_str(), 65534, 65534) == 0);
  auto w = blackbox::Writer::create(dir.path().string(), "h", smallLayout());
  REQUIRE_FALSE(w.ok());
  CHECK(w.status().message().find("belongs to uid 65534") != std::string::npos);
  CHECK(readFile(path) == "theirs");
}

TEST_CASE("a region replaced under its writer is not removed by it", "[blackbox][files]") {
  test::TempDir dir;
  const std::string path = regionIn(dir);
  auto w = blackbox::Writer::create(dir.path().string(), "h", smallLayout());
  REQUIRE(w.ok());
  fs::rename(path, path + ".moved");
  writeFile(path, "someone else's");
  w.value().reset();
  CHECK(readFile(path) == "someone else's");
}
