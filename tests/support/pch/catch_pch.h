// Precompiled header of the test binaries: Catch2's single header is ~650 KB
// and would otherwise be parsed again by every test source.
#include <catch2/catch.hpp>
