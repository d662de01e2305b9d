"""The report tests' inputs, made by the real tools at test time and kept in
the build directory until one of the programs that made them changes.

demo job: scripts/demo.py in its short configuration (8 ranks of the
GPU-less demo, a SIGKILL and a SIGSTOP); while it runs, every rank's live
blackbox is read with resilient-inspect --json (the regions of processes that
exit cleanly are gone at the end). Kept: the faulty job's rank reports,
post-mortem dumps, monitor logs, and the last snapshot of each of its
processes (bb-<pid>.json).

nccl job: NCCL 2.28.9's recorded profiler calls of a 2-rank job on an H200
(tests/fixtures/nccl-2.28.9-h200/) replayed through the real profiler plugin
(replay_profiler.py): rank 0 stops inside the last all-reduce, which hangs
(NCCL_RESILIENT_COLL_TIMEOUT_MS=200 makes it a fault); rank 1 stops before
enqueuing it (behind). While both are held, resilient-inspect --job --json
--record watches the two live regions: rank 1, alive and inside no
collective, has not entered the all-reduce rank 0 waits in, a stuck rank
(NCCL_RESILIENT_STUCK_RANK_TIMEOUT_MS as --stuck-rank-timeout-ms 500); the
report goes into rank 1's blackbox. Kept: rank 0's live snapshot
(bb-<pid>.json), rank 1's raw region left by a SIGKILL
(resilient-blackbox-<pid>, its fault ring holding the stuck-rank record),
resilient-inspect --compare --json of both (compare.json) and the
resilient-inspect --job --json lines (stuck.jsonl).

health job: scripts/health_soak.py with a straggler (the demo's job, 6 active
ranks and 2 spares, initial rank 2 computing 100 ms longer each step): active
rank 0 names it, rank 2 records the report in its blackbox and its timeline.
While it runs, resilient-inspect --job --json watches the job's blackbox
directory (health.jsonl: its reports and each round's standings) and every
rank's live blackbox is read as for the demo job. Kept: the rank reports,
monitor logs, bb-<pid>.json, health.jsonl.
"""

import fcntl
import glob
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
RECORDINGS = os.path.join(SOURCE, "tests", "fixtures", "nccl-2.28.9-h200")
PYTHON = sys.executable


class FixtureError(Exception):
    pass


def binaries(build):
    return {
        "inspect": os.path.join(build, "tools", "inspect", "resilient-inspect"),
        "profiler": os.path.join(build, "plugin", "profiler", "libnccl-profiler-resilient.so"),
        "demo": os.path.join(build, "demo", "resilient-demo-train"),
        "store": os.path.join(build, "tools", "store", "resilient-store"),
        "monitor": os.path.join(build, "restart", "monitor", "resilient-monitor"),
        "plugin": os.path.join(build, "plugin", "net", "abi", "libnccl-net-resilient.so"),
    }


def stamp_of(paths):
    out = {}
    for p in paths:
        try:
            st = os.stat(p)
            out[p] = [st.st_mtime_ns, st.st_size]
        except OSError:
            out[p] = None
    return out


def cached(build, name, inputs, make):
    """<build>/tests/integration/report/fixtures/<name>, remade when an input changed."""
    root = os.path.join(build, "tests", "integration", "report", "fixtures")
    os.makedirs(root, exist_ok=True)
    target = os.path.join(root, name)
    stamp_path = target + ".stamp"
    with open(os.path.join(root, ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = stamp_of(inputs + [os.path.abspath(__file__)])
        try:
            with open(stamp_path) as f:
                if json.load(f) == stamp and os.path.isdir(target):
                    return target
        except (OSError, ValueError):
            pass
        shutil.rmtree(target, ignore_errors=True)
        work = target + ".work"
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        make(work)
        os.replace(work, target)
        with open(stamp_path, "w") as f:
            json.dump(stamp, f)
        return target


def inspect_json(inspect, *targets, compare=False):
    argv = [inspect, "--json"] + (["--compare"] if compare else []) + list(targets)
    p = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                       stdin=subprocess.DEVNULL)
    if p.returncode != 0:
        return None
    try:
        return json.loads(p.stdout)
    except ValueError:
        return None


def children_of(pid):
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out.append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    return out


def blackbox_dir_of(pid):
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            for item in f.read().split(b"\0"):
                if item.startswith(b"NCCL_RESILIENT_BLACKBOX_DIR="):
                    return item.split(b"=", 1)[1].decode()
    except OSError:
        pass
    return None


def job_of(pid):
    """The demo job a rank process runs in (its --run-dir), or None."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            args = f.read().split(b"\0")
    except OSError:
        return None
    for a in args:
        if a.startswith(b"--run-dir="):
            return os.path.basename(a.split(b"=", 1)[1].decode())
    return None


class SnapshotWatcher(threading.Thread):
    """Reads the live blackbox regions of the ranks of a demo's job every half
    second and keeps the last good snapshot of each process."""

    def __init__(self, demo_pid, inspect, job, interval=0.5):
        super().__init__(daemon=True)
        self.demo_pid = demo_pid
        self.inspect = inspect
        self.job = job
        self.interval = interval
        self.stop = threading.Event()
        self.region_dir = None
        self.snapshots = {}
        self.others = set()  # pids of the other job's ranks

    def run(self):
        while not self.stop.is_set():
            if self.region_dir is None:
                for child in children_of(self.demo_pid):
                    self.region_dir = self.region_dir or blackbox_dir_of(child)
            if self.region_dir:
                self.read_regions()
            self.stop.wait(self.interval)

    def read_regions(self):
        for path in glob.glob(os.path.join(self.region_dir, "resilient-blackbox-*")):
            pid = int(path.rsplit("-", 1)[1])
            if pid in self.others:
                continue
            job = job_of(pid)
            if job is not None and job != self.job:
                self.others.add(pid)
                continue
            if job is None and pid in self.snapshots:
                continue  # gone: its last snapshot stays
            snap = inspect_json(self.inspect, path)
            if snap and snap.get("pid") == pid:
                self.snapshots[pid] = snap


def make_demo_job(build, work):
    b = binaries(build)
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp)
    env = dict(os.environ, TMPDIR=tmp)
    argv = [PYTHON, os.path.join(SOURCE, "scripts", "demo.py"), "--build", build, "--keep",
            "--steps", "120", "--kill-at", "30", "--stop-at", "80"]
    log_path = os.path.join(work, "demo.out")
    with open(log_path, "w") as log:
        demo = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL)
        watcher = SnapshotWatcher(demo.pid, b["inspect"], "faulty")
        watcher.start()
        try:
            rc = demo.wait(timeout=240)
        except subprocess.TimeoutExpired:
            demo.kill()
            demo.wait()
            rc = "timeout"
        watcher.stop.set()
        watcher.join()
    if rc != 0:
        with open(log_path) as f:
            raise FixtureError(f"scripts/demo.py exited with {rc}:\n{f.read()[-4000:]}")
    runs = glob.glob(os.path.join(tmp, "resilient-demo-*"))
    if len(runs) != 1:
        raise FixtureError(f"expected one demo run directory in {tmp}, found {runs}")
    faulty = os.path.join(runs[0], "faulty")
    job = os.path.join(work, "demo-job")
    os.makedirs(job)
    pids = set()
    for path in sorted(glob.glob(os.path.join(faulty, "*"))):
        name = os.path.basename(path)
        if name.endswith(".json") or (name.startswith("monitor-") and name.endswith(".log")):
            shutil.copy2(path, job)
        if name.startswith("rank-") and name.endswith(".json"):
            with open(path) as f:
                pids.add(json.load(f).get("pid"))
        if name.endswith(".postmortem.json"):
            with open(path) as f:
                pids.add(json.load(f).get("pid"))
    for pid, snap in watcher.snapshots.items():
        if pid in pids:
            with open(os.path.join(job, f"bb-{pid}.json"), "w") as f:
                json.dump(snap, f, indent=1)
    shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(work, "info.json"), "w") as f:
        json.dump({"pids": sorted(p for p in pids if p), "snapshots": len(
            [p for p in watcher.snapshots if p in pids])}, f)


HEALTH_STRAGGLER = 2
HEALTH_ACTIVE = 6


def make_health_job(build, work):
    b = binaries(build)
    tmp = os.path.join(work, "tmp")
    os.makedirs(tmp)
    env = dict(os.environ, TMPDIR=tmp)
    argv = [PYTHON, os.path.join(SOURCE, "scripts", "health_soak.py"), "--build", build,
            "--seconds", "20", "--straggler", str(HEALTH_STRAGGLER), "--delay-ms", "100",
            "--keep"]
    job = os.path.join(work, "health-job")
    os.makedirs(job)
    log_path = os.path.join(work, "health_soak.out")
    jsonl = os.path.join(job, "health.jsonl")
    inspect = None
    with open(log_path, "w") as log:
        soak = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env,
                                stdin=subprocess.DEVNULL)
        # The job's own rank processes run with --run-dir=<run dir>/job.
        watcher = SnapshotWatcher(soak.pid, b["inspect"], "job", interval=1.0)
        watcher.start()
        try:
            # resilient-inspect --job once every active rank has its region, for
            # 12 s of the job's ~20: its last round sees the job running.
            deadline = time.monotonic() + 60
            while inspect is None and soak.poll() is None and time.monotonic() < deadline:
                regions = glob.glob(os.path.join(watcher.region_dir or "/nonexistent",
                                                 "resilient-blackbox-*"))
                if len(regions) >= HEALTH_ACTIVE:
                    with open(jsonl, "w") as out:
                        inspect = subprocess.Popen(
                            [b["inspect"], "--job", "--json", "--dir", watcher.region_dir,
                             "--seconds", "12"], stdout=out, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, text=True)
                else:
                    time.sleep(0.2)
            rc = soak.wait(timeout=240)
        except subprocess.TimeoutExpired:
            soak.kill()
            soak.wait()
            rc = "timeout"
        finally:
            watcher.stop.set()
            watcher.join()
            inspect_err = ""
            if inspect is not None:
                try:
                    _, inspect_err = inspect.communicate(timeout=30)
                except subprocess.TimeoutExpired:
                    inspect.kill()
                    _, inspect_err = inspect.communicate()
    with open(log_path) as f:
        soak_out = f.read()
    if rc != 0:
        raise FixtureError(f"scripts/health_soak.py exited with {rc}:\n{soak_out[-4000:]}")
    if inspect is None:
        raise FixtureError(f"the job's {HEALTH_ACTIVE} blackbox regions never appeared "
                           f"(directory {watcher.region_dir})")
    if inspect.returncode != 0 or os.path.getsize(jsonl) == 0:
        raise FixtureError(f"resilient-inspect --job --json exited with {inspect.returncode} "
                           f"and wrote {os.path.getsize(jsonl)} bytes: {inspect_err[-2000:]}")
    runs = glob.glob(os.path.join(tmp, "resilient-health-*"))
    if len(runs) != 1:
        raise FixtureError(f"expected one run directory in {tmp}, found {runs}")
    pids = {}
    for path in sorted(glob.glob(os.path.join(runs[0], "job", "*"))):
        name = os.path.basename(path)
        if (name.startswith("rank-") and name.endswith(".json")) or (
                name.startswith("monitor-") and name.endswith(".log")):
            shutil.copy2(path, job)
        if name.startswith("rank-") and name.endswith(".json"):
            with open(path) as f:
                report = json.load(f)
            pids[report["rank"]] = report["pid"]
    for pid, snap in watcher.snapshots.items():
        if pid in pids.values():
            with open(os.path.join(job, f"bb-{pid}.json"), "w") as f:
                json.dump(snap, f, indent=1)
    shutil.rmtree(tmp, ignore_errors=True)
    with open(os.path.join(work, "info.json"), "w") as f:
        json.dump({"pids": {str(r): p for r, p in sorted(pids.items())},
                   "straggler": HEALTH_STRAGGLER,
                   "snapshots": sorted(p for p in watcher.snapshots if p in pids.values())}, f)


def sanitizer_env(library):
    """What a Python process needs to dlopen `library` when it was built with
    AddressSanitizer (a -Db_sanitize=address build): the ASan runtime first."""
    try:
        p = subprocess.run(["ldd", library], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    for line in p.stdout.splitlines():
        parts = line.split()
        if parts and parts[0].startswith("libasan.so") and len(parts) >= 3:
            # The interpreter's own allocations are not ours to check.
            return {"LD_PRELOAD": parts[2], "ASAN_OPTIONS": "detect_leaks=0"}
    return {}


def make_nccl_job(build, work):
    b = binaries(build)
    regions = os.path.join(work, "regions")
    os.makedirs(regions)
    job = os.path.join(work, "nccl-job")
    os.makedirs(job)
    env = dict(os.environ, NCCL_RESILIENT_BLACKBOX_DIR=regions,
               NCCL_RESILIENT_COLL_TIMEOUT_MS="200", **sanitizer_env(b["profiler"]))
    replay = os.path.join(HERE, "replay_profiler.py")
    ranks = []
    for recording, cut in (("profiler-3672.jsonl", "in-last-op"),
                           ("profiler-3673.jsonl", "before-last-op")):
        p = subprocess.Popen([PYTHON, replay, "--plugin", b["profiler"], "--recording",
                              os.path.join(RECORDINGS, recording), "--cut", cut, "--hold"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             env=env, text=True)
        ranks.append(p)
    try:
        for p in ranks:
            line = p.stdout.readline()
            if not line.startswith("replayed"):
                p.kill()
                raise FixtureError(f"replay_profiler.py: {line!r} {p.stderr.read()[-2000:]}")
        live = os.path.join(regions, f"resilient-blackbox-{ranks[0].pid}")
        deadline = time.monotonic() + 20
        snap = None
        while time.monotonic() < deadline:
            snap = inspect_json(b["inspect"], live)
            if snap and any(f.get("class") == "collective hung" for f in snap.get("faults", [])):
                break
            time.sleep(0.2)
        else:
            raise FixtureError(f"rank 0's region shows no hung collective: {snap}")
        with open(os.path.join(job, f"bb-{ranks[0].pid}.json"), "w") as f:
            json.dump(snap, f, indent=1)
        stuck = watch_stuck_rank(b["inspect"], regions, os.path.join(job, "stuck.jsonl"))
        if (stuck["subject"].get("pid") != ranks[1].pid or stuck["coll_index"] !=
                snap_in_flight(snap)):
            raise FixtureError(f"the stuck rank is not rank 1 (pid {ranks[1].pid}) missing "
                               f"rank 0's collective in flight: {stuck}")
        ranks[1].send_signal(signal.SIGKILL)
        ranks[1].wait(timeout=10)
        raw = os.path.join(regions, f"resilient-blackbox-{ranks[1].pid}")
        if not os.path.exists(raw):
            raise FixtureError(f"the killed replayer left no region at {raw}")
        shutil.copy2(raw, job)
        compare = inspect_json(b["inspect"], live, os.path.join(job, os.path.basename(raw)),
                               compare=True)
        if compare is None:
            raise FixtureError("resilient-inspect --compare failed")
        with open(os.path.join(job, "compare.json"), "w") as f:
            json.dump(compare, f, indent=1)
    finally:
        for p in ranks:
            if p.poll() is None:
                p.stdin.close()
                try:
                    p.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.kill()
    with open(os.path.join(work, "info.json"), "w") as f:
        json.dump({"pids": [p.pid for p in ranks], "stuck_rank_timeout_ms": STUCK_TIMEOUT_MS},
                  f)
    shutil.rmtree(regions, ignore_errors=True)


STUCK_TIMEOUT_MS = 500


def snap_in_flight(snap):
    """The index of the collective in flight on the snapshot's communicator, or None."""
    for c in snap.get("communicators") or []:
        oldest = c.get("oldest_in_flight")
        if isinstance(oldest, dict) and oldest.get("coll_index"):
            return oldest["coll_index"]
    return None


def watch_stuck_rank(inspect, regions, path):
    """resilient-inspect --job --json --record over the live regions in `regions` for
    2 s, into `path`; returns its one report, which must be a stuck rank (the straggler
    threshold is out of reach: the replays' arrivals are as far apart as their starts)."""
    with open(path, "w") as out:
        p = subprocess.run([inspect, "--job", "--json", "--record", "--dir", regions,
                            "--interval-ms", "200", "--seconds", "2",
                            "--stuck-rank-timeout-ms", str(STUCK_TIMEOUT_MS),
                            "--straggler-lag-ms", "3600000"], stdout=out,
                           stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True,
                           timeout=60)
    with open(path) as f:
        lines = f.read().splitlines()
    reports = [json.loads(line)["report"] for line in lines if line.startswith('{"report"')]
    if p.returncode != 0 or len(reports) != 1 or reports[0].get("kind") != "stuck rank":
        raise FixtureError(f"resilient-inspect --job --record exited with {p.returncode} and "
                           f"reported {reports}, not one stuck rank: {p.stderr[-2000:]}")
    return reports[0]


def demo_job(build):
    b = binaries(build)
    inputs = [b["inspect"], b["demo"], b["store"], b["monitor"], b["plugin"],
              os.path.join(SOURCE, "scripts", "demo.py")]
    return os.path.join(cached(build, "demo", inputs, lambda w: make_demo_job(build, w)),
                        "demo-job")


def nccl_job(build):
    b = binaries(build)
    inputs = [b["inspect"], b["profiler"], os.path.join(HERE, "replay_profiler.py")]
    return os.path.join(cached(build, "nccl", inputs, lambda w: make_nccl_job(build, w)),
                        "nccl-job")


def health_job(build):
    b = binaries(build)
    inputs = [b["inspect"], b["demo"], b["store"], b["monitor"], b["plugin"],
              os.path.join(SOURCE, "scripts", "health_soak.py"),
              os.path.join(SOURCE, "scripts", "demo.py")]
    return os.path.join(cached(build, "health", inputs, lambda w: make_health_job(build, w)),
                        "health-job")


def missing_binaries(build):
    return [p for p in binaries(build).values() if not os.path.exists(p)]
