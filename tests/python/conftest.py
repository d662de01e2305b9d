"""Fixtures of the Python package's tests: the build directory (BUILD_DIR),
a resilient-store on loopback, and jobs of rank_main.py processes."""

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.path.abspath(os.environ.get("BUILD_DIR", os.path.join(REPO, "build")))
sys.path.insert(0, os.path.join(REPO, "python"))


def _env():
    env = dict(os.environ)
    env["PYTHONPATH"] = os.path.join(REPO, "python")
    env["BUILD_DIR"] = BUILD
    env.setdefault("NCCL_RESILIENT_JOB_TOKEN", secrets.token_hex(16))
    env["NCCL_RESILIENT_SOCKET_IFNAME"] = "lo"
    return env


@pytest.fixture(scope="session")
def base_env():
    return _env()


@pytest.fixture(scope="session")
def store_url(base_env, tmp_path_factory):
    """A resilient-store for the session's jobs (each job has its own job id)."""
    binary = os.path.join(BUILD, "tools", "store", "resilient-store")
    if not os.path.exists(binary):
        pytest.fail(f"{binary} is missing: build the project first")
    log = tmp_path_factory.mktemp("store") / "store.log"
    with open(log, "wb") as out:
        p = subprocess.Popen([binary, "--listen", "127.0.0.1:0"], stdout=out,
                             stderr=subprocess.STDOUT, env=base_env, start_new_session=True)
    deadline = time.monotonic() + 20
    url = None
    while time.monotonic() < deadline and url is None:
        m = re.search(r"resilient-store serving (tcp://\S+)", log.read_text())
        url = m.group(1) if m else None
        if url is None:
            assert p.poll() is None, log.read_text()
            time.sleep(0.02)
    assert url, "resilient-store did not start"
    yield url
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=10)


class Job:
    """The ranks' results and how each process ended."""

    def __init__(self, results, returncodes, out_dir):
        self.results = results
        self.returncodes = returncodes
        self.out_dir = out_dir

    def outcome(self, rank):
        return self.results[rank]["outcome"] if rank in self.results else None

    def explain(self, rank, lines=25):
        """What a failed check shows of a rank: its result, how its process
        ended and the end of its log (a rank that wrote no result)."""
        log = self.out_dir / f"rank-{rank}.log"
        tail = log.read_text(errors="replace").splitlines()[-lines:] if log.exists() else []
        return (f"rank {rank}: result {self.results.get(rank)}, exit {self.returncodes[rank]}, "
                "log:\n" + "\n".join(tail))


@pytest.fixture
def run_job(base_env, store_url, tmp_path):
    def run(scenario, world_size, timeout=90, env=None):
        out_dir, n = tmp_path / scenario, 1
        while out_dir.exists():  # a test may run a scenario twice
            out_dir, n = tmp_path / f"{scenario}-{n}", n + 1
        out_dir.mkdir()
        procs = []
        job_id = f"{scenario}-{uuid.uuid4().hex[:8]}"
        for r in range(world_size):
            e = dict(base_env, RANK=str(r), WORLD_SIZE=str(world_size), LOCAL_RANK=str(r),
                     NCCL_RESILIENT_STORE_URL=store_url,
                     NCCL_RESILIENT_RESTART_JOB=job_id,
                     SCENARIO=scenario, OUT_DIR=str(out_dir))
            e.update(env or {})
            log = open(out_dir / f"rank-{r}.log", "wb")
            procs.append(subprocess.Popen([sys.executable, os.path.join(HERE, "rank_main.py")],
                                          stdout=log, stderr=subprocess.STDOUT, env=e,
                                          start_new_session=True))
        deadline = time.monotonic() + timeout
        try:
            for p in procs:
                p.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            pytest.fail(f"job {scenario} still running after {timeout} s (logs in {out_dir})")
        finally:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
        results = {}
        for r in range(world_size):
            path = out_dir / f"rank-{r}.json"
            if path.exists():
                results[r] = json.loads(path.read_text())
        return Job(results, [p.returncode for p in procs], out_dir)
    return run
