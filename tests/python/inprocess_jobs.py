"""Running the inprocess tests' jobs: one process per rank with the
environment torchrun gives (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT), the Wrapper's store served by rank 0 at MASTER_PORT as the
reference's is (NCCL_RESILIENT_STORE_URL unset)."""

import json
import os
import signal
import socket
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    """A port nobody listens on now, and the one above it."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port >= 65535:
            continue
        with socket.socket() as t:
            try:
                t.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port
    raise RuntimeError("no two free ports in a row")


class Job:
    def __init__(self, results, returncodes, out_dir, seconds):
        self.results = results
        self.returncodes = returncodes
        self.out_dir = out_dir
        self.seconds = seconds

    def outcome(self, rank):
        return self.results[rank]["outcome"] if rank in self.results else None

    def log(self, rank):
        return (self.out_dir / f"rank-{rank}.log").read_text(errors="replace")


def run_ranks(base_env, out_dir, script, world_size, timeout, env=None, python=sys.executable):
    """Starts ``script`` (a path, or a name in this folder) as ``world_size``
    ranks of ``python`` and waits for them."""
    port = free_port()
    procs = []
    start = time.monotonic()
    for r in range(world_size):
        e = dict(base_env, RANK=str(r), WORLD_SIZE=str(world_size), LOCAL_RANK=str(r),
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OUT_DIR=str(out_dir))
        e.pop("NCCL_RESILIENT_STORE_URL", None)
        e.update(env or {})
        log = open(out_dir / f"rank-{r}.log", "wb")
        procs.append(subprocess.Popen([str(python), os.path.join(HERE, script)],
                                      stdout=log, stderr=subprocess.STDOUT, env=e,
                                      start_new_session=True))
    deadline = start + timeout
    try:
        for p in procs:
            p.wait(timeout=max(0.1, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        pytest.fail(f"{script} still running after {timeout} s (logs in {out_dir})")
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    seconds = time.monotonic() - start
    results = {}
    for r in range(world_size):
        path = out_dir / f"rank-{r}.json"
        if path.exists():
            results[r] = json.loads(path.read_text())
    return Job(results, [p.returncode for p in procs], out_dir, seconds)
