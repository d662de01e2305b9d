#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "common/file_replace.h"
#include "tests/support/temp_dir.h"

namespace {

std::string readFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

}  // namespace

TEST_CASE("a file is replaced whole, with its mode, and no temporary is left", "[replace]") {
  resilient::test::TempDir dir;
  const auto path = dir.path() / "out.json";
  REQUIRE(resilient::replaceFile(path.string(), "first", 0600).ok());
  REQUIRE(resilient::replaceFile(path.string(), "second", 0600).ok());
  CHECK(readFile(path) == "second");
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK((st.st_mode & 0777) == 0600);
  size_t entries = 0;
  for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir.path())) {
    ++entries;
  }
  CHECK(entries == 1);
}

TEST_CASE("a link at the name is replaced, never followed", "[replace]") {
  resilient::test::TempDir dir;
  const auto victim = dir.path() / "victim";
  { std::ofstream(victim) << "precious"; }
  const auto path = dir.path() / "out";
  std::filesystem::create_symlink(victim, path);
  REQUIRE(resilient::replaceFile(path.string(), "ours").ok());
  CHECK(readFile(victim) == "precious");
  CHECK_FALSE(std::filesystem::is_symlink(path));
  CHECK(readFile(path) == "ours");
}

TEST_CASE("an unwritable directory is an error naming the file", "[replace]") {
  const auto s = resilient::replaceFile("/nonexistent-dir/x", "y");
  REQUIRE_FALSE(s.ok());
  CHECK(s.message().find("/nonexistent-dir/x.tmp.") != std::string::npos);
}
