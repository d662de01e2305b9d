#!/usr/bin/python3
"""Replays one rank's recording of NCCL driving the profiler plugin
(tests/fixtures/nccl-2.28.9-h200/profiler-<pid>.jsonl, written by the GPU
kit's recorder) through the real plugin's exported ncclProfiler_v5, in this
process: the plugin then writes this process's blackbox (communicator table
and flight recorder) exactly as it does under NCCL. The report tests use it
to get flight-recorder operations on a machine without a GPU.

--cut before-last-op stops before the recording's last operation is enqueued
(the rank is behind); --cut in-last-op stops once the last operation's first
kernel channel started (it is then in flight and, past
NCCL_RESILIENT_COLL_TIMEOUT_MS, hung). With --hold the process prints
"replayed <pid>" and waits for its standard input to close (or a signal):
the region stays live until then; a SIGKILL leaves it behind as a
post-mortem file.

Event timing follows the recording (the gaps between calls are slept).
Only what the recording holds is declared: ncclProfiler_v5 (NCCL 2.28), the
event descriptor layout of include/nccl/profiler_v5.h.
"""

import argparse
import ctypes
import json
import os
import sys
import time

# Event type bits (include/nccl/profiler_common.h).
TYPE_BITS = {
    "Group": 1 << 0, "Coll": 1 << 1, "P2p": 1 << 2, "ProxyOp": 1 << 3, "ProxyStep": 1 << 4,
    "ProxyCtrl": 1 << 5, "KernelCh": 1 << 6, "NetPlugin": 1 << 7, "GroupApi": 1 << 8,
    "CollApi": 1 << 9, "P2pApi": 1 << 10, "KernelLaunch": 1 << 11,
}


class GroupApi(ctypes.Structure):
    _fields_ = [("graphCaptured", ctypes.c_bool), ("groupDepth", ctypes.c_int)]


class CollApi(ctypes.Structure):
    _fields_ = [("func", ctypes.c_char_p), ("count", ctypes.c_size_t),
                ("datatype", ctypes.c_char_p), ("root", ctypes.c_int),
                ("stream", ctypes.c_void_p), ("graphCaptured", ctypes.c_bool)]


class P2pApi(ctypes.Structure):
    _fields_ = [("func", ctypes.c_char_p), ("count", ctypes.c_size_t),
                ("datatype", ctypes.c_char_p), ("stream", ctypes.c_void_p),
                ("graphCaptured", ctypes.c_bool)]


class Coll(ctypes.Structure):
    _fields_ = [("seqNumber", ctypes.c_uint64), ("func", ctypes.c_char_p),
                ("sendBuff", ctypes.c_void_p), ("recvBuff", ctypes.c_void_p),
                ("count", ctypes.c_size_t), ("root", ctypes.c_int),
                ("datatype", ctypes.c_char_p), ("nChannels", ctypes.c_uint8),
                ("nWarps", ctypes.c_uint8), ("algo", ctypes.c_char_p),
                ("proto", ctypes.c_char_p), ("parentGroup", ctypes.c_void_p)]


class P2p(ctypes.Structure):
    _fields_ = [("func", ctypes.c_char_p), ("buff", ctypes.c_void_p),
                ("datatype", ctypes.c_char_p), ("count", ctypes.c_size_t),
                ("peer", ctypes.c_int), ("nChannels", ctypes.c_uint8),
                ("parentGroup", ctypes.c_void_p)]


class ProxyOp(ctypes.Structure):
    _fields_ = [("pid", ctypes.c_int), ("channelId", ctypes.c_uint8), ("peer", ctypes.c_int),
                ("nSteps", ctypes.c_int), ("chunkSize", ctypes.c_int), ("isSend", ctypes.c_int)]


class ProxyStep(ctypes.Structure):
    _fields_ = [("step", ctypes.c_int)]


class KernelCh(ctypes.Structure):
    _fields_ = [("channelId", ctypes.c_uint8), ("pTimer", ctypes.c_uint64)]


class DescrUnion(ctypes.Union):
    _fields_ = [("groupApi", GroupApi), ("collApi", CollApi), ("p2pApi", P2pApi),
                ("coll", Coll), ("p2p", P2p), ("proxyOp", ProxyOp), ("proxyStep", ProxyStep),
                ("kernelCh", KernelCh), ("pad", ctypes.c_uint8 * 88)]


class Descr(ctypes.Structure):
    _anonymous_ = ("u",)
    _fields_ = [("type", ctypes.c_uint64), ("parentObj", ctypes.c_void_p), ("rank", ctypes.c_int),
                ("u", DescrUnion)]


class StateArgs(ctypes.Union):
    _fields_ = [("transSize", ctypes.c_size_t), ("pTimer", ctypes.c_uint64)]


LOGGER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_ulong, ctypes.c_char_p, ctypes.c_int,
                          ctypes.c_char_p)


class ProfilerV5(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("init", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint64,
                                  ctypes.POINTER(ctypes.c_int), ctypes.c_char_p, ctypes.c_int,
                                  ctypes.c_int, ctypes.c_int, LOGGER)),
        ("startEvent", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                                        ctypes.POINTER(ctypes.c_void_p), ctypes.POINTER(Descr))),
        ("stopEvent", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)),
        ("recordEventState", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int,
                                              ctypes.POINTER(StateArgs))),
        ("finalize", ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p)),
    ]


@LOGGER
def log_sink(level, flags, file, line, fmt):
    # Variadic in C: only the format is shown.
    sys.stderr.write(f"[plugin log {level}] {fmt.decode(errors='replace') if fmt else ''}\n")


def operation_indices(events):
    """Indices of the Coll/P2p start events, in order."""
    return [i for i, e in enumerate(events)
            if e["call"] == "start" and e.get("type") in ("Coll", "P2p")]


def cut_index(events, how):
    """Index of the first event not replayed."""
    if how == "none":
        return len(events)
    ops = operation_indices(events)
    last = ops[-1]
    last_id = events[last]["id"]
    if how == "before-last-op":
        # Back to the start of the outermost group API call that enqueued it.
        i = last
        while i > 0 and not (events[i]["call"] == "start" and events[i]["type"] == "GroupApi"):
            i -= 1
        return i
    for i in range(last, len(events)):
        e = events[i]
        if e["call"] == "start" and e.get("type") == "KernelCh" and e.get("parent") == last_id:
            return i + 1
    raise SystemExit("the last operation has no kernel channel event")


class Replayer:
    def __init__(self, plugin_path):
        self.lib = ctypes.CDLL(plugin_path)
        self.plugin = ProfilerV5.in_dll(self.lib, "ncclProfiler_v5")
        self.contexts = {}   # recorded ctx -> our context
        self.handles = {}    # recorded event id -> our handle
        self.strings = {}    # keeps the C strings alive for the plugin
        self.mask = ctypes.c_int(0)

    def cstr(self, s):
        if s is None:
            return None
        # The plugin may keep the pointer (NCCL's strings are static): the
        # buffer lives as long as this object.
        if s not in self.strings:
            self.strings[s] = ctypes.create_string_buffer(s.encode())
        return ctypes.cast(self.strings[s], ctypes.c_char_p)

    def handle(self, event_id):
        return self.handles.get(event_id) if event_id is not None else None

    def init(self, e):
        ctx = ctypes.c_void_p()
        rc = self.plugin.init(ctypes.byref(ctx), int(e["commId"], 16), ctypes.byref(self.mask),
                              self.cstr(e.get("commName")), e["nNodes"], e["nranks"], e["rank"],
                              log_sink)
        if rc != 0:
            raise SystemExit(f"profiler init returned {rc}")
        self.contexts[e["ctx"]] = ctx

    def start(self, e):
        d = Descr()
        kind = e["type"]
        d.type = TYPE_BITS[kind]
        d.parentObj = self.handle(e.get("parent"))
        d.rank = e.get("rank", -1)
        if kind == "GroupApi":
            d.groupApi.graphCaptured = e["graphCaptured"]
            d.groupApi.groupDepth = e["groupDepth"]
        elif kind == "CollApi":
            d.collApi.func = self.cstr(e["func"])
            d.collApi.count = e["count"]
            d.collApi.datatype = self.cstr(e["datatype"])
            d.collApi.root = e["root"]
            d.collApi.graphCaptured = e["graphCaptured"]
        elif kind == "P2pApi":
            d.p2pApi.func = self.cstr(e["func"])
            d.p2pApi.count = e["count"]
            d.p2pApi.datatype = self.cstr(e["datatype"])
            d.p2pApi.graphCaptured = e["graphCaptured"]
        elif kind == "Coll":
            c = d.coll
            c.seqNumber = e["seqNumber"]
            c.func = self.cstr(e["func"])
            c.count = e["count"]
            c.root = e["root"]
            c.datatype = self.cstr(e["datatype"])
            c.nChannels = e["nChannels"]
            c.nWarps = e["nWarps"]
            c.algo = self.cstr(e["algo"])
            c.proto = self.cstr(e["proto"])
            c.parentGroup = self.handle(e.get("parentGroup"))
        elif kind == "P2p":
            p = d.p2p
            p.func = self.cstr(e["func"])
            p.datatype = self.cstr(e["datatype"])
            p.count = e["count"]
            p.peer = e["peer"]
            p.nChannels = e["nChannels"]
            p.parentGroup = self.handle(e.get("parentGroup"))
        elif kind == "ProxyOp":
            o = d.proxyOp
            o.pid = os.getpid()  # the recording's process is this one now
            o.channelId = e["channelId"]
            o.peer = e["peer"]
            o.nSteps = e["nSteps"]
            o.chunkSize = e["chunkSize"]
            o.isSend = e["isSend"]
        elif kind == "ProxyStep":
            d.proxyStep.step = e["step"]
        elif kind == "KernelCh":
            d.kernelCh.channelId = e["channelId"]
            d.kernelCh.pTimer = e["pTimer"]
        out = ctypes.c_void_p()
        self.plugin.startEvent(self.contexts.get(e.get("ctx")), ctypes.byref(out), ctypes.byref(d))
        self.handles[e["id"]] = out.value

    def state(self, e):
        args = None
        if "transSize" in e:
            args = StateArgs(transSize=e["transSize"])
        elif "pTimer" in e:
            args = StateArgs(pTimer=e["pTimer"])
        self.plugin.recordEventState(self.handle(e["id"]), e["state"],
                                     ctypes.byref(args) if args is not None else None)

    def stop(self, e):
        self.plugin.stopEvent(self.handle(e["id"]))

    def finalize(self, e):
        self.plugin.finalize(self.contexts.pop(e["ctx"]))

    def replay(self, events):
        t0_rec = events[0]["t_ns"]
        t0 = time.monotonic_ns()
        for e in events:
            wait = (e["t_ns"] - t0_rec) - (time.monotonic_ns() - t0)
            if wait > 0:
                time.sleep(wait / 1e9)
            getattr(self, e["call"])(e)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--plugin", required=True, help="a library exporting ncclProfiler_v5")
    p.add_argument("--recording", required=True, help="profiler-<pid>.jsonl")
    p.add_argument("--cut", choices=["none", "before-last-op", "in-last-op"], default="none")
    p.add_argument("--hold", action="store_true",
                   help="after the replay, wait for standard input to close")
    args = p.parse_args()
    with open(args.recording) as f:
        events = [json.loads(line) for line in f if line.strip()]
    end = cut_index(events, args.cut)
    replayed = events[:end]
    if args.cut != "none":
        replayed = [e for e in replayed if e["call"] != "finalize"]
    r = Replayer(args.plugin)
    r.replay(replayed)
    print(f"replayed {os.getpid()} {len(replayed)} of {len(events)} events", flush=True)
    if args.hold:
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
