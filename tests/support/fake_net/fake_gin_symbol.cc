// Linked into libnccl-net-fake-v11-gin.so: a net plugin library that also
// exports a GIN plugin symbol (NCCL 2.29's ncclGinPlugin_v12), as a vendor
// library offering GPU-initiated networking does. Only the symbol's presence
// matters: the resilient wrapper does not pass GIN through and says so once
// (plugin/net/not_wrapped.h); nothing calls through it.
extern "C" __attribute__((visibility("default"))) const char ncclGinPlugin_v12[] = "FakeGin";
