// Facts read from NCCL's installed public nccl.h in a translation unit of its
// own (it cannot share one with our declarations), for the cross-check in
// test_abi_values.cc. Compiled only when the build finds nccl.h.
#pragma once

#include <cstddef>

namespace resilient::test {

struct PublicNcclLayout {
  int resultValues[9] = {};
  size_t configSize = 0;
  unsigned configMagic = 0;
  struct {
    size_t netName, trafficClass, commName, shrinkShare, nvlinkCentricSched;
  } configOffsets{};
};

PublicNcclLayout installedNcclLayout();

}  // namespace resilient::test
