"""The NCCL calls the kit's own drivers make (faults.py, bandwidth.py,
recovery.py, nccl_probe.py), through ctypes on the libnccl that PyTorch
loaded, so that the kit times exactly what NCCL returns. Memory and streams
come from torch.

Written from NCCL's documented C API (nccl.h of 2.28 and 2.29): result codes,
the 128-byte unique id passed by value, ncclFloat32 = 7, ncclSum = 0,
ncclConfig_t, NCCL_SHRINK_ABORT = 1, NCCL_REVOKE_DEFAULT = 0.

**Pointers NCCL writes later.** A non-blocking communicator's creation
(ncclCommInitRankConfig, ncclCommShrink, ncclCommSplit, ncclCommGrow) hands
NCCL a `ncclComm_t*` that NCCL's own thread writes when the job ends
(NCCL v2.28.9-1 src/init.cc ncclCommInitRankFunc, label exit:
`__atomic_store_n(job->newcomm, comm, ...)`); ncclCommShrink/Split even leave
it NULL on return (ncclCommInitChildComm: `*newcomm = NCCL_COMM_NULL`). Such
a pointer must outlive the job: comm_slot() gives one that lives as long as
the process (never a Python local that may be freed meanwhile).
"""

import ctypes
import os
import time

SUCCESS = 0
INVALID_ARGUMENT = 4
INVALID_USAGE = 5
REMOTE_ERROR = 6
IN_PROGRESS = 7
FLOAT32 = 7
SUM = 0
SHRINK_ABORT = 1  # nccl.h NCCL_SHRINK_ABORT
REVOKE_DEFAULT = 0  # nccl.h NCCL_REVOKE_DEFAULT
CONFIG_MAGIC = 0xCAFEBEEF  # nccl.h NCCL_CONFIG_INITIALIZER's magic
UNDEF_INT = -2147483648  # nccl.h NCCL_CONFIG_UNDEF_INT (INT_MIN)

RESULT_NAMES = {0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError",
                3: "ncclInternalError", 4: "ncclInvalidArgument", 5: "ncclInvalidUsage",
                6: "ncclRemoteError", 7: "ncclInProgress"}


def result_name(code):
    return RESULT_NAMES.get(code, str(code))


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class Config(ctypes.Structure):
    """ncclConfig_t as NCCL 2.28 lays it out (ncclConfig_v22800, 80 bytes);
    `size` and `version` tell a newer NCCL which fields there are (2.29's
    parseCommConfig copies min(size, its own) bytes and fills the rest)."""

    _fields_ = [("size", ctypes.c_size_t), ("magic", ctypes.c_uint), ("version", ctypes.c_uint),
                ("blocking", ctypes.c_int), ("cgaClusterSize", ctypes.c_int),
                ("minCTAs", ctypes.c_int), ("maxCTAs", ctypes.c_int),
                ("netName", ctypes.c_char_p), ("splitShare", ctypes.c_int),
                ("trafficClass", ctypes.c_int), ("commName", ctypes.c_char_p),
                ("collnetEnable", ctypes.c_int), ("CTAPolicy", ctypes.c_int),
                ("shrinkShare", ctypes.c_int), ("nvlsCTAs", ctypes.c_int),
                ("nChannelsPerNetPeer", ctypes.c_int), ("nvlinkCentricSched", ctypes.c_int)]


def config(blocking):
    """A ncclConfig_t with every field undefined (NCCL's defaults) but
    `blocking`; it lives as long as the process (comm_slot)."""
    c = Config()
    c.size = ctypes.sizeof(Config)
    c.magic = CONFIG_MAGIC
    c.version = 22800
    c.blocking = 1 if blocking else 0
    for name in ("cgaClusterSize", "minCTAs", "maxCTAs", "splitShare", "trafficClass",
                 "collnetEnable", "CTAPolicy", "shrinkShare", "nvlsCTAs", "nChannelsPerNetPeer",
                 "nvlinkCentricSched"):
        setattr(c, name, UNDEF_INT)
    _KEPT.append(c)
    return c


def non_blocking_config():
    return config(blocking=False)


# Everything NCCL may still write or read after the call that took it: kept
# until the process ends.
_KEPT = []


def comm_slot():
    """A ncclComm_t that lives as long as the process: for the `newcomm`
    argument of a call whose job may store into it later."""
    slot = ctypes.c_void_p()
    _KEPT.append(slot)
    return slot


class NcclError(Exception):
    def __init__(self, call, code, text):
        super().__init__(f"{call}: {result_name(code)}: {text}")
        self.code = code


def loaded_library(name="libnccl.so"):
    """The path of the library this process has mapped whose file name starts
    with `name` (after `import torch` and torch.cuda.init()), or None."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 6 and os.path.basename(parts[5]).startswith(name):
                return parts[5]
    return None


class Nccl:
    def __init__(self, path):
        self.path = path
        self.lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
        L = self.lib
        comm_p = ctypes.POINTER(ctypes.c_void_p)
        L.ncclGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
        L.ncclGetUniqueId.argtypes = [ctypes.POINTER(UniqueId)]
        L.ncclCommInitRank.argtypes = [comm_p, ctypes.c_int, UniqueId, ctypes.c_int]
        L.ncclCommInitRankConfig.argtypes = [comm_p, ctypes.c_int, UniqueId, ctypes.c_int,
                                             ctypes.POINTER(Config)]
        L.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        L.ncclCommGetAsyncError.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        L.ncclGetLastError.argtypes = [ctypes.c_void_p]
        L.ncclGetLastError.restype = ctypes.c_char_p
        L.ncclGetErrorString.argtypes = [ctypes.c_int]
        L.ncclGetErrorString.restype = ctypes.c_char_p
        L.ncclCommAbort.argtypes = [ctypes.c_void_p]
        L.ncclCommDestroy.argtypes = [ctypes.c_void_p]
        L.ncclGroupStart.argtypes = []
        L.ncclGroupEnd.argtypes = []
        self.version_code = self.version()[0]
        # The fault-tolerance calls, where this NCCL has them: revoke from
        # 2.28.7, shrink from 2.27, grow (and ncclCommGetUniqueId) from 2.29.
        self.revoke_fn = self._optional("ncclCommRevoke", 22807, [ctypes.c_void_p, ctypes.c_int])
        self.shrink_fn = self._optional("ncclCommShrink", 22700, [
            ctypes.c_void_p, ctypes.POINTER(ctypes.c_int), ctypes.c_int, comm_p,
            ctypes.POINTER(Config), ctypes.c_int])
        self.grow_fn = self._optional("ncclCommGrow", 22900, [
            ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int, comm_p,
            ctypes.POINTER(Config)])
        self.grow_id_fn = self._optional("ncclCommGetUniqueId", 22900, [ctypes.c_void_p, ctypes.c_void_p])
        if self.grow_fn is None or self.grow_id_fn is None:
            self.grow_fn = self.grow_id_fn = None

    def _optional(self, name, since, argtypes):
        fn = getattr(self.lib, name, None) if self.version_code >= since else None
        if fn is not None:
            fn.argtypes = argtypes
        return fn

    def _check(self, call, code, comm=None):
        if code not in (SUCCESS, IN_PROGRESS):
            raise NcclError(call, code, self.last_error(comm))
        return code

    def version(self):
        v = ctypes.c_int()
        self._check("ncclGetVersion", self.lib.ncclGetVersion(ctypes.byref(v)))
        code = v.value
        return code, f"{code // 10000}.{code // 100 % 100}.{code % 100}"

    def unique_id(self):
        uid = UniqueId()
        self._check("ncclGetUniqueId", self.lib.ncclGetUniqueId(ctypes.byref(uid)))
        # Not uid.internal: a c_char array reads as bytes up to its first NUL.
        return ctypes.string_at(ctypes.addressof(uid), ctypes.sizeof(uid)).hex()

    @staticmethod
    def _uid(uid_hex):
        uid = UniqueId()
        raw = bytes.fromhex(uid_hex)
        if len(raw) != ctypes.sizeof(uid):
            raise ValueError(f"a unique id has {ctypes.sizeof(uid)} bytes, not {len(raw)}")
        ctypes.memmove(ctypes.addressof(uid), raw, len(raw))
        return uid

    def init_rank(self, nranks, uid_hex, rank):
        """A blocking communicator (ncclCommInitRank)."""
        uid = self._uid(uid_hex)
        comm = comm_slot()
        self._check("ncclCommInitRank", self.lib.ncclCommInitRank(ctypes.byref(comm), nranks, uid, rank))
        return comm

    def init_rank_config(self, nranks, uid_hex, rank, blocking):
        """(code, comm) of ncclCommInitRankConfig; a non-blocking one is ready
        once settle() says so."""
        uid = self._uid(uid_hex)
        comm = comm_slot()
        code = self._check("ncclCommInitRankConfig", self.lib.ncclCommInitRankConfig(
            ctypes.byref(comm), nranks, uid, rank, ctypes.byref(config(blocking))), comm)
        return code, comm

    def all_reduce(self, comm, send_ptr, recv_ptr, count, stream):
        return self._check("ncclAllReduce", self.lib.ncclAllReduce(
            ctypes.c_void_p(send_ptr), ctypes.c_void_p(recv_ptr), count, FLOAT32, SUM, comm,
            ctypes.c_void_p(stream)), comm)

    def async_error(self, comm):
        r = ctypes.c_int()
        code = self.lib.ncclCommGetAsyncError(comm, ctypes.byref(r))
        return r.value if code == SUCCESS else code

    def settle(self, comm, deadline, interval_s=0.0002, give_up=None):
        """Polls ncclCommGetAsyncError until it is no longer ncclInProgress:
        (state, seconds). state is None when the deadline passed first, or
        when give_up() said so."""
        t0 = time.monotonic()
        while True:
            state = self.async_error(comm)
            if state != IN_PROGRESS:
                return state, time.monotonic() - t0
            if time.monotonic() > deadline or (give_up is not None and give_up()):
                return None, time.monotonic() - t0
            time.sleep(interval_s)

    def last_error(self, comm=None):
        s = self.lib.ncclGetLastError(comm)
        return s.decode(errors="replace") if s else ""

    def abort(self, comm):
        return self.lib.ncclCommAbort(comm)

    def destroy(self, comm):
        return self.lib.ncclCommDestroy(comm)

    def group_start(self):
        return self.lib.ncclGroupStart()

    def group_end(self):
        """ncclGroupEnd: ncclInvalidUsage at depth 0 ("not in a group call",
        NCCL v2.28.9-1 src/group.cc ncclGroupEndInternal); anything else
        means this thread was inside a group."""
        return self.lib.ncclGroupEnd()

    def revoke(self, comm):
        return self.revoke_fn(comm, REVOKE_DEFAULT)

    def shrink(self, comm, exclude, newcomm, cfg, flags=SHRINK_ABORT):
        """ncclCommShrink; `newcomm` must be a comm_slot() (NCCL stores the
        child there later)."""
        ranks = (ctypes.c_int * len(exclude))(*exclude)
        _KEPT.append(ranks)
        return self.shrink_fn(comm, ranks, len(exclude), ctypes.byref(newcomm), ctypes.byref(cfg), flags)


def join_communicator(nccl_lib, run_dir, rank, nranks, timeout_s=60):
    """(Nccl, comm) of this worker: torch on GPU 0, the libnccl torch loaded,
    rank 0's unique id shared through files in run_dir (kit.exchange)."""
    import torch

    import kit

    torch.cuda.set_device(0)
    torch.cuda.init()
    nccl = Nccl(nccl_lib)
    deadline = time.monotonic() + timeout_s
    uid = nccl.unique_id() if rank == 0 else None
    ids = kit.exchange(run_dir, "uid", rank, uid, nranks, deadline)
    return nccl, nccl.init_rank(nranks, ids[0], rank)
