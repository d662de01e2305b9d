"""The package in one process: options, errors, the store client."""

import datetime
import os
import subprocess
import sys

import pytest

import nccl_resilient as nr


def test_unknown_option_is_named():
    with pytest.raises(nr.ConfigError, match="no option 'soft_timeot'"):
        nr.Wrapper(soft_timeout=1, soft_timeot=2)


def test_ordering_rules_are_the_librarys():
    with pytest.raises(nr.ConfigError, match="soft"):
        nr.Wrapper(store_url="memory", rank=0, world_size=1, use_monitor_process=False,
                   soft_timeout=datetime.timedelta(seconds=5), hard_timeout=2)


def test_environment_fallback():
    # An option not given comes from its NCCL_RESILIENT_RESTART_* knob (read
    # once per process: a process of its own).
    code = ("import nccl_resilient as nr\n"
            "try:\n"
            "    nr.Wrapper(store_url='memory', rank=0, world_size=1, use_monitor_process=False)\n"
            "except nr.ConfigError as e:\n"
            "    print('ConfigError', e)\n")
    env = dict(os.environ, NCCL_RESILIENT_RESTART_SOFT_TIMEOUT_MS="500000",
               PYTHONPATH=os.pathsep.join(sys.path))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert "ConfigError" in out.stdout and "soft" in out.stdout, out


def test_single_process_restart_and_context():
    seen = []
    w = nr.Wrapper(store_url="memory", rank=0, world_size=1, use_monitor_process=False,
                   monitor_thread_interval=0.05, restart_backoff=0.01,
                   finalize=lambda s: seen.append(("finalize", s.iteration)))

    @w
    def fn(ctx: nr.CallContext, value):
        seen.append(("fn", ctx.iteration, ctx.rank, ctx.world_size))
        with ctx.atomic():
            ctx.ping()
        with ctx.disable_hang_protection():
            pass
        if ctx.iteration == 0:
            raise KeyError("first call fails")
        assert isinstance(ctx.state.fn_exception, KeyError)
        return value * 2

    assert fn(21) == 42
    assert seen == [("fn", 0, 0, 1), ("finalize", 0), ("fn", 1, 0, 1)]
    phases = [e["phase"] for e in w.timeline()]
    assert "fault detected" in phases and phases[-1] == "completed"


def test_function_error_text_reaches_the_fault_record():
    # The fault records the library publishes carry the Python exception's
    # text: the restart-storm error quotes the recurring fault from them.
    w = nr.Wrapper(store_url="memory", rank=0, world_size=1, use_monitor_process=False,
                   storm_limit=1, restart_backoff=0.01, monitor_thread_interval=0.05)
    with pytest.raises(nr.RestartAbort, match="OSError: disk on fire"):
        w.run(lambda: (_ for _ in ()).throw(OSError("disk on fire")))


def test_store_client():
    s = nr.Store("memory").view("t")
    s.set("a", b"1")
    assert s.get("a") == b"1" and s.get("missing") is None
    assert s.add("n", 3) == 3 and s.add("n", -1) == 2
    assert s.compare_set("a", b"1", b"2") == (True, b"2")
    assert s.compare_set("a", b"1", b"3") == (False, b"2")
    assert s.compare_set("new", None, b"x") == (True, b"x")
    assert s.check(["a", "new"]) and not s.check(["a", "nope"])
    with pytest.raises(nr.TimeoutError):
        s.wait(["nope"], timeout=0.1)
    assert s.delete("a") and not s.delete("a")
    assert s.delete_prefix("") == 2


RESTARTED_STORE = """
import socket, subprocess, sys, threading, time
import nccl_resilient as nr
binary = sys.argv[1]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
def serve():
    p = subprocess.Popen([binary, "--listen", f"127.0.0.1:{port}"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    assert "serving" in p.stdout.readline()
    return p
server = serve()
a, b = nr.Store(f"tcp://127.0.0.1:{port}"), nr.Store(f"tcp://127.0.0.1:{port}")
a.set("before", "1")
server.kill(); server.wait()
server = serve()  # what resilient-run does with the job's store
try:
    a.set("after", "2")
    assert a.get("after") == b"2" and a.get("before") is None  # its state is lost
    threading.Timer(0.3, lambda: b.set("later", "3")).start()
    a.wait(["later"], timeout=10)
    assert a.add("n", 1) == 1 and b.add("n", 1) == 2
    print("followed")
finally:
    server.kill()
"""


def test_store_client_follows_a_restarted_server(base_env):
    # The agent serves the job's store again after it died; the Python Store
    # (and torch's process groups over it) failed every call after that: a
    # torch job hung in its next rendezvous.
    binary = os.path.join(os.environ.get("BUILD_DIR", "build"), "tools", "store",
                          "resilient-store")
    r = subprocess.run([sys.executable, "-c", RESTARTED_STORE, binary], env=base_env,
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "followed" in r.stdout, r.stdout + r.stderr


def test_help_is_useful():
    doc = nr.Wrapper.__doc__
    for word in ("soft_timeout", "NCCL_RESILIENT_RESTART_", "rank_assignment", "CallContext"):
        assert word in doc


def test_blocking_calls_release_the_gil():
    # While the main thread waits in the library (a store wait), another
    # Python thread keeps running.
    import threading
    s = nr.Store("memory")
    counted = [0]
    stop = threading.Event()

    def count():
        while not stop.is_set():
            counted[0] += 1

    t = threading.Thread(target=count)
    t.start()
    try:
        before = counted[0]
        with pytest.raises(nr.TimeoutError):
            s.wait(["never"], timeout=0.5)
        during = counted[0] - before
    finally:
        stop.set()
        t.join()
    assert during > 10000, during


def test_stock_health_checks():
    st = nr.State(0, 1, 0, 1, 0, 1, 0, nr.Mode.ACTIVE)
    failed = nr.State(0, 1, 0, 1, 0, 1, 1, nr.Mode.ACTIVE, fn_failed=True)
    counter = nr.FaultCounter(1)
    counter(st)       # no fault: nothing counted
    counter(failed)   # the first fault: allowed
    with pytest.raises(nr.FaultCounterExceeded, match="more than maxRankFaults 1"):
        counter(nr.State(0, 1, 0, 1, 0, 1, 2, nr.Mode.ACTIVE, fn_failed=True))
    with pytest.raises(nr.ConfigError):
        nr.FaultCounter(-1)
    # No GPU here: the CUDA check says so (a HealthCheckError, never a crash).
    if not os.path.exists("/dev/nvidia0"):
        with pytest.raises(nr.HealthCheckError):
            nr.CudaHealthCheck(timeout=1)(st)


def test_threaded_finalize():
    import time
    nr.ThreadedFinalize(1, lambda s: None)(None)
    with pytest.raises(nr.TimeoutError):
        nr.ThreadedFinalize(0.1, lambda s: time.sleep(1))(None)
    with pytest.raises(KeyError):
        nr.ThreadedFinalize(1, lambda s: {}["x"])(None)
