"""Stand-ins for torch and NCCL that let test_kit.py walk the GPU kit's
workers (nccl_probe.py, recovery.py) through every phase on the CPU, each
rank a thread: the exchanges between ranks, the order of the calls, the
polling, the results and the tables they feed. Not a model of NCCL (the
restart library's tests have that); only what the workers rely on, each as
NCCL 2.28.9 does it, so that a worker written against the wrong behaviour
fails here:

- a non-blocking creation returns ncclInProgress and the communicator is
  ready only after polling (src/group.cc ncclGroupEndInternal);
- a collective on a communicator still in progress is ncclInvalidArgument
  (src/init.cc ncclCommEnsureReady), on a revoked one ncclInvalidUsage
  (src/enqueue.cc ncclEnqueueCheck), on one whose peer died the proxy's
  error, which revoke does not clear;
- ncclCommShrink sets *newcomm to NULL and returns success; the child
  appears later while the PARENT is polled (ncclCommInitChildComm,
  ncclCommInitRankFunc); after a fault it fails in ncclCommEnsureReady;
  ncclCommGetAsyncError(NULL) is ncclInvalidArgument (CommCheck);
- ncclCommDestroy of a communicator in error returns that error with the
  thread's group depth left at one (ncclCommDestroy), and a collective of
  that thread then only joins the group (nothing is reduced); ncclGroupEnd
  at depth 0 is ncclInvalidUsage (ncclGroupEndInternal);
- ncclCommGrow stores the grown communicator before its job runs and the job
  is polled on it (v2.29.7-1 ncclCommGrow).

A rank "killed" by the test raises Killed from its next NCCL call.
"""

import ctypes
import itertools
import os
import secrets
import threading

import nccl_ctypes as nc


class Killed(BaseException):
    """What a killed rank's thread ends with."""


class FakeTensor:
    registry = {}
    _ids = itertools.count(1000)

    def __init__(self, n, value):
        self.values = [float(value)] * n
        self.ptr = next(FakeTensor._ids)
        FakeTensor.registry[self.ptr] = self

    def data_ptr(self):
        return self.ptr

    def __getitem__(self, i):
        return _Scalar(self.values[i])

    def fill_(self, v):
        self.values = [float(v)] * len(self.values)
        return self


class _Scalar:
    def __init__(self, v):
        self.v = v

    def item(self):
        return self.v


class _Stream:
    cuda_stream = 1

    def query(self):
        return True

    def synchronize(self):
        pass


class _Cuda:
    def set_device(self, d):
        pass

    def init(self):
        pass

    def current_stream(self):
        return _Stream()


class _Event:
    def record(self, stream=None):
        pass

    def query(self):
        return True


_Cuda.Event = _Event


class FakeTorch:
    cuda = _Cuda()
    __version__ = "2.11.0+fake"

    @staticmethod
    def ones(n, device=None):
        return FakeTensor(n, 1.0)

    @staticmethod
    def empty(n, device=None):
        return FakeTensor(n, 0.0)

    @staticmethod
    def device(*args):
        return args


class FakeDist:
    """torch.distributed for one rank of a job whose ranks share `uid`: an
    NCCL communicator (blocking, as torch makes them) in `nccl`'s world; an
    all-reduce completes at once, or, once the uid is broken, completes with
    an error that wait() raises (the rank killed raises Killed)."""

    def __init__(self, nccl, uid):
        self.nccl = nccl
        self.uid = uid
        self.handle = None
        dist = self

        class _Backend:
            def _comm_ptr(self):
                return dist.handle

        class _Group:
            def _get_backend(self, device):
                return _Backend()

        class _C10d:
            @staticmethod
            def _get_default_group():
                return _Group()

        self.distributed_c10d = _C10d()

    @staticmethod
    def FileStore(path, n):
        return (path, n)

    def init_process_group(self, backend, store=None, rank=None, world_size=None, timeout=None, device_id=None):
        self.handle = self.nccl.world.new_comm(uid=self.uid, n=world_size, rank=rank, blocking=True)

    def all_reduce(self, t, async_op=False):
        return _Work(self, t)


class _Work:
    def __init__(self, dist, t):
        self.dist = dist
        self.t = t
        self.code = dist.nccl._all_reduce(t.ptr, dist.handle)

    def is_completed(self):
        return True

    def wait(self):
        if self.code != nc.SUCCESS:
            raise RuntimeError(f"NCCL error: {nc.result_name(self.code)}")


class World:
    """What every rank's NCCL shares: the communicators, and which unique
    ids a dead peer broke."""

    def __init__(self):
        self.lock = threading.Lock()
        self.comms = {}
        self.handles = itertools.count(0x1000)
        self.broken_uids = set()
        self.depth = threading.local()

    def new_comm(self, **kw):
        with self.lock:
            h = next(self.handles)
            self.comms[h] = dict(dict(state=nc.SUCCESS, polls=0, then=nc.SUCCESS, revoked=False, aborted=False,
                                      blocking=False, on_ready=None), **kw)
            return h

    def break_uid(self, uid):
        with self.lock:
            self.broken_uids.add(uid)


def _value(p):
    return p.value if hasattr(p, "value") else p


class _Lib:
    def __init__(self, fake):
        self.fake = fake

    def ncclAllReduce(self, send, recv, count, dtype, op, comm, stream):
        return self.fake._all_reduce(_value(recv), comm)


class FakeNccl(nc.Nccl):
    """One rank's NCCL. `dies_on_fault`: this rank is the one the test kills
    (its next call after the break raises Killed)."""

    def __init__(self, world, dies_on_fault=False, grow=True, net_plugin_ref_count=0):
        self.world = world
        # The net plugin's count of this process (v2.28.9-1 src/plugin/net.cc):
        # NCCL_NET_PLUGIN_REF_COUNT to start with, one per communicator
        # initialised, one less per communicator freed; at zero the plugin is
        # unloaded and its entry wiped (ncclNetPluginUnload's memset, the
        # name included), so every later init fails "Failed to initialize
        # any NET plugin" (ncclNetInit) with NCCL_NET naming the plugin.
        self.plugin_refs = net_plugin_ref_count
        self.plugin_gone = False
        self.path = "fake"
        self.dies_on_fault = dies_on_fault
        self.version_code = 22809 if not grow else 22907
        self.lib = _Lib(self)
        self.revoke_fn = self._revoke
        self.shrink_fn = self._shrink
        self.grow_fn = self._grow if grow else None
        self.grow_id_fn = self._grow_id if grow else None

    # ---- helpers
    def version(self):
        code = self.version_code
        return code, f"{code // 10000}.{code // 100 % 100}.{code % 100}"

    def _comm(self, comm):
        h = _value(comm)
        return None if h is None else self.world.comms.get(h)

    def _broken(self, c):
        return c.get("uid") in self.world.broken_uids and not c["aborted"]

    def _check_killed(self, c):
        if self.dies_on_fault and c is not None and c.get("uid") in self.world.broken_uids:
            raise Killed()

    def _depth(self):
        return getattr(self.world.depth, "value", 0)

    def _set_depth(self, v):
        self.world.depth.value = v

    # ---- the API
    def unique_id(self):
        return secrets.token_hex(128)

    def _init(self, nranks, uid_hex, rank, blocking):
        slot = nc.comm_slot()
        h = self.world.new_comm(uid=uid_hex, n=nranks, rank=rank, blocking=blocking, counted=False)
        slot.value = h  # NCCL stores it before the job (init.cc ncclCommInitRankDev)
        c = self.world.comms[h]
        outcome = nc.INVALID_USAGE if self.plugin_gone else nc.SUCCESS
        if outcome == nc.SUCCESS:
            self.plugin_refs += 1
            c["counted"] = True
        if not blocking:
            c.update(state=nc.IN_PROGRESS, polls=2, then=outcome)
        elif outcome != nc.SUCCESS:
            raise nc.NcclError("ncclCommInitRank", outcome, "Failed to initialize any NET plugin")
        return slot

    def _freed(self, c):
        """A communicator of this process freed: its share of the plugin's count."""
        if c is not None and c.get("counted"):
            c["counted"] = False
            self.plugin_refs -= 1
            if self.plugin_refs == 0:
                self.plugin_gone = True

    def init_rank(self, nranks, uid_hex, rank):
        return self._init(nranks, uid_hex, rank, True)

    def init_rank_config(self, nranks, uid_hex, rank, blocking):
        slot = self._init(nranks, uid_hex, rank, blocking)
        return (nc.SUCCESS if blocking else nc.IN_PROGRESS), slot

    def async_error(self, comm):
        c = self._comm(comm)
        if c is None:
            return nc.INVALID_ARGUMENT  # CommCheck
        self._check_killed(c)
        if c["state"] == nc.IN_PROGRESS:
            c["polls"] -= 1
            if c["polls"] <= 0:
                c["state"] = c["then"]
                if c["on_ready"] is not None:
                    c["on_ready"]()
                    c["on_ready"] = None
            return nc.IN_PROGRESS
        if self._broken(c):
            return nc.REMOTE_ERROR  # the proxy's error: nothing clears it
        return c["state"]

    def _all_reduce(self, recv, comm):
        c = self._comm(comm)
        if c is None:
            return nc.INVALID_ARGUMENT
        self._check_killed(c)
        if c["revoked"]:
            return nc.INVALID_USAGE
        if c["state"] == nc.IN_PROGRESS:
            return nc.INVALID_ARGUMENT  # "Attempt to use communicator before ..."
        if self._broken(c):
            return nc.REMOTE_ERROR
        if self._depth() > 0:
            return nc.SUCCESS  # joins the thread's open group: nothing launched
        t = FakeTensor.registry[recv]
        t.values = [float(c["n"])] * len(t.values)
        if not c["blocking"]:
            c.update(state=nc.IN_PROGRESS, polls=1, then=nc.SUCCESS)
            return nc.IN_PROGRESS
        return nc.SUCCESS

    def last_error(self, comm=None):
        return "fake NCCL: pid 4242 is gone"

    def abort(self, comm):
        c = self._comm(comm)
        if c is not None:
            c["aborted"] = True
            self._freed(c)
        return nc.SUCCESS

    def destroy(self, comm):
        c = self._comm(comm)
        self._set_depth(self._depth() + 1)  # ncclGroupStartInternal
        if self._broken(c) or c["state"] == nc.IN_PROGRESS:
            return nc.REMOTE_ERROR if self._broken(c) else nc.INVALID_ARGUMENT  # no ncclGroupEndInternal
        c["aborted"] = True
        self._freed(c)
        self._set_depth(self._depth() - 1)
        return nc.SUCCESS

    def group_start(self):
        self._set_depth(self._depth() + 1)
        return nc.SUCCESS

    def group_end(self):
        if self._depth() == 0:
            return nc.INVALID_USAGE
        self._set_depth(self._depth() - 1)
        return nc.SUCCESS

    def _revoke(self, comm, flags):
        c = self._comm(comm)
        self._check_killed(c)
        c.update(revoked=True, state=nc.IN_PROGRESS, polls=2, then=nc.SUCCESS)
        return nc.IN_PROGRESS

    def _shrink(self, comm, ranks, count, newcomm_ref, cfg_ref, flags):
        c = self._comm(comm)
        self._check_killed(c)
        slot = newcomm_ref._obj
        if self._broken(c):
            return nc.REMOTE_ERROR  # ncclCommEnsureReady(parent)
        slot.value = None  # *newcomm = NCCL_COMM_NULL

        def store_child():
            slot.value = self.world.new_comm(uid=c["uid"] + "-shrunk", n=c["n"] - count, rank=c["rank"])

        c.update(state=nc.IN_PROGRESS, polls=3, then=nc.SUCCESS, on_ready=store_child)
        return nc.SUCCESS  # the group's ncclInProgress is swallowed

    def _grow_id(self, comm, ptr):
        ctypes.memmove(_value(ptr), os.urandom(128), 128)
        return nc.SUCCESS

    def _grow(self, parent, nranks, uid_ptr, rank, newcomm_ref, cfg_ref):
        slot = newcomm_ref._obj
        p = self._comm(parent)
        slot.value = self.world.new_comm(uid=(p["uid"] if p else "new") + "-grown", n=nranks,
                                         rank=rank if p is None else p["rank"])
        self.world.comms[slot.value].update(state=nc.IN_PROGRESS, polls=2, then=nc.SUCCESS)
        return nc.IN_PROGRESS
