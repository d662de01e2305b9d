"""The few NCCL calls the kit's own drivers make (faults.py, bandwidth.py),
through ctypes on the libnccl that PyTorch loaded, so that the kit times
exactly what NCCL returns: ncclCommGetAsyncError, ncclGetLastError and
ncclCommAbort. Memory and streams come from torch.

Written from NCCL's documented C API (nccl.h of 2.28): result codes, the
128-byte unique id passed by value, ncclFloat32 = 7, ncclSum = 0.
"""

import ctypes
import os

SUCCESS = 0
IN_PROGRESS = 7
FLOAT32 = 7
SUM = 0

RESULT_NAMES = {0: "ncclSuccess", 1: "ncclUnhandledCudaError", 2: "ncclSystemError",
                3: "ncclInternalError", 4: "ncclInvalidArgument", 5: "ncclInvalidUsage",
                6: "ncclRemoteError", 7: "ncclInProgress"}


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class NcclError(Exception):
    def __init__(self, call, code, text):
        super().__init__(f"{call}: {RESULT_NAMES.get(code, code)}: {text}")
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
        L.ncclGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
        L.ncclGetUniqueId.argtypes = [ctypes.POINTER(UniqueId)]
        L.ncclCommInitRank.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, UniqueId, ctypes.c_int]
        L.ncclAllReduce.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int,
                                    ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p]
        L.ncclCommGetAsyncError.argtypes = [ctypes.c_void_p, ctypes.POINTER(ctypes.c_int)]
        L.ncclGetLastError.argtypes = [ctypes.c_void_p]
        L.ncclGetLastError.restype = ctypes.c_char_p
        L.ncclGetErrorString.argtypes = [ctypes.c_int]
        L.ncclGetErrorString.restype = ctypes.c_char_p
        L.ncclCommAbort.argtypes = [ctypes.c_void_p]
        L.ncclCommDestroy.argtypes = [ctypes.c_void_p]

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

    def init_rank(self, nranks, uid_hex, rank):
        uid = UniqueId()
        raw = bytes.fromhex(uid_hex)
        if len(raw) != ctypes.sizeof(uid):
            raise ValueError(f"a unique id has {ctypes.sizeof(uid)} bytes, not {len(raw)}")
        ctypes.memmove(ctypes.addressof(uid), raw, len(raw))
        comm = ctypes.c_void_p()
        self._check("ncclCommInitRank", self.lib.ncclCommInitRank(ctypes.byref(comm), nranks, uid, rank))
        return comm

    def all_reduce(self, comm, send_ptr, recv_ptr, count, stream):
        return self._check("ncclAllReduce", self.lib.ncclAllReduce(
            ctypes.c_void_p(send_ptr), ctypes.c_void_p(recv_ptr), count, FLOAT32, SUM, comm,
            ctypes.c_void_p(stream)), comm)

    def async_error(self, comm):
        r = ctypes.c_int()
        code = self.lib.ncclCommGetAsyncError(comm, ctypes.byref(r))
        return r.value if code == SUCCESS else code

    def last_error(self, comm=None):
        s = self.lib.ncclGetLastError(comm)
        return s.decode(errors="replace") if s else ""

    def abort(self, comm):
        return self.lib.ncclCommAbort(comm)

    def destroy(self, comm):
        return self.lib.ncclCommDestroy(comm)


def join_communicator(nccl_lib, run_dir, rank, nranks, timeout_s=60):
    """(Nccl, comm) of this worker: torch on GPU 0, the libnccl torch loaded,
    rank 0's unique id shared through files in run_dir (kit.exchange)."""
    import time

    import torch

    import kit

    torch.cuda.set_device(0)
    torch.cuda.init()
    nccl = Nccl(nccl_lib)
    deadline = time.monotonic() + timeout_s
    uid = nccl.unique_id() if rank == 0 else None
    ids = kit.exchange(run_dir, "uid", rank, uid, nranks, deadline)
    return nccl, nccl.init_rank(nranks, ids[0], rank)
