"""The carried set of the GPU validation kit, and how its steps start ranks.

The kit's binaries are built on the Debian machine (scripts/gpu/build_kit.sh)
into a folder whose `manifest.json` names each file by its role, at the path
it had in the build directory (so that scripts/demo.py finds the demo's
binaries under `<kit>/build`). On the GPU machine nothing is built: NCCL and
the CUDA runtime are the ones PyTorch brings, found by the environment step.

Everything here is standard library only: it also runs in CI (--dry-run).
"""

import argparse
import ctypes
import json
import os
import re
import signal
import subprocess
import time
import traceback

# Roles every kit has, with the meson target that builds each.
ROLES = {
    "net_plugin": "nccl-net-resilient",
    "plain_plugin": "nccl-net-tcp-plain",
    "profiler_plugin": "nccl-profiler-resilient",
    "recorder": "nccl-resilient-recorder",
    "restart_library": "resilient-restart",
    "inspect": "resilient-inspect",
    "demo_train": "resilient-demo-train",
    "store": "resilient-store",
    "monitor": "resilient-monitor",
    "agent": "resilient-run",  # scripts/demo.py launches the ranks through it (no NCCL call of its own)
}

# The name each net plugin gives NCCL (plugin/net/abi/adapter.h,
# tests/gpu/recorder/net_recorder.cc): NCCL_NET makes NCCL use it or fail.
NET_NAMES = {"net_plugin": "Resilient", "plain_plugin": "ResilientTcpPlain", "recorder": "Recorder"}

# What the carried set may need on the GPU machine: glibc's libraries, the
# compiler runtime, and the kit's own libraries (found through
# LD_LIBRARY_PATH). NCCL and CUDA are loaded at run time (dlopen), never linked.
ALLOWED_LIBRARIES = re.compile(
    r"^(linux-vdso\.so\.1|ld-linux-x86-64\.so\.2|libc\.so\.6|libm\.so\.6|libdl\.so\.2|"
    r"libpthread\.so\.0|librt\.so\.1|libgcc_s\.so\.1|libstdc\+\+\.so\.6|libresilient-restart\.so(\.[0-9.]+)?)$")

MAX_KIT_BYTES = 64 * 1024 * 1024

# The restart library and the programs linked with it (not the NCCL plugins,
# which keep their exceptions to themselves behind the C ABI).
SHARED_RUNTIME_ROLES = ("restart_library", "demo_train", "monitor", "store", "inspect")


class KitError(Exception):
    pass


class Kit:
    """A carried set: its folder and the manifest the builder wrote."""

    def __init__(self, root):
        self.root = os.path.abspath(root)
        path = os.path.join(self.root, "manifest.json")
        try:
            with open(path) as f:
                self.manifest = json.load(f)
        except FileNotFoundError:
            raise KitError(f"{path} is missing: build the kit with scripts/gpu/build_kit.sh")
        except (OSError, ValueError) as e:
            raise KitError(f"{path} cannot be read: {e}")
        files = self.manifest.get("files")
        if not isinstance(files, dict):
            raise KitError(f"{path} has no 'files' table")
        missing = sorted(set(ROLES) - set(files))
        if missing:
            raise KitError(f"{path} lacks the roles {', '.join(missing)}")
        self.files = {role: os.path.join(self.root, rel) for role, rel in files.items()}
        absent = [p for p in self.files.values() if not os.path.isfile(p)]
        if absent:
            raise KitError("the kit lacks " + ", ".join(absent))

    def path(self, role):
        return self.files[role]

    @property
    def build_dir(self):
        """The folder that mirrors the build directory (scripts/demo.py --build)."""
        return os.path.join(self.root, "build")

    def library_dirs(self):
        return sorted({os.path.dirname(p) for p in self.files.values() if ".so" in os.path.basename(p)})

    def size_bytes(self):
        total = 0
        for dirpath, _, names in os.walk(self.root):
            for n in names:
                total += os.lstat(os.path.join(dirpath, n)).st_size
        return total


def parse_ldd(text):
    """[(name, resolved path or None)] from `ldd` output."""
    out = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("statically linked"):
            continue
        m = re.match(r"^(\S+)\s+=>\s+(not found|\S+)", line)
        if m:
            out.append((m.group(1), None if m.group(2) == "not found" else m.group(2)))
            continue
        m = re.match(r"^(\S+)\s+\(0x", line)
        if m:
            out.append((os.path.basename(m.group(1)), m.group(1)))
    return out


def check_dependencies(kit):
    """The ldd check of every file of the kit: problems (empty: fine) and the
    libraries seen, with the kit's own library folders on LD_LIBRARY_PATH."""
    env = dict(os.environ, LD_LIBRARY_PATH=":".join(kit.library_dirs()))
    problems, seen = [], {}
    for role, path in sorted(kit.files.items()):
        p = subprocess.run(["ldd", path], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            problems.append(f"{role}: ldd {path} failed: {(p.stderr or p.stdout).strip()}")
            continue
        needed = parse_ldd(p.stdout)
        # Exceptions cross from libresilient-restart.so into the programs that
        # call it: they must share one C++ runtime (one unwinder). A static copy
        # in each ended the first GPU run's demo in std::terminate.
        if role in SHARED_RUNTIME_ROLES and "libstdc++.so.6" not in {n for n, _ in needed}:
            problems.append(f"{role}: carries its own C++ runtime (linked statically); exceptions thrown "
                            "by libresilient-restart.so through it would end in std::terminate")
        for name, resolved in needed:
            seen.setdefault(name, resolved)
            if resolved is None and not ALLOWED_LIBRARIES.match(name):
                problems.append(f"{role}: needs {name}, which is not found")
            elif not ALLOWED_LIBRARIES.match(name):
                problems.append(f"{role}: needs {name} ({resolved}), which the GPU machine lacks")
            elif resolved is None:
                problems.append(f"{role}: needs {name}, which is not found")
    size = kit.size_bytes()
    if size > MAX_KIT_BYTES:
        problems.append(f"the kit holds {size} bytes, over the {MAX_KIT_BYTES} that can be carried")
    return problems, {"libraries": seen, "bytes": size}


def rank_environment(base, rank, *, host_prefix="gpukit"):
    """One rank's environment: its own NCCL_HOSTID, so that NCCL sees one host
    per process and every byte between them goes through the net plugin
    (several ranks on one GPU; docs/gpu-validation.md)."""
    env = dict(base)
    env["NCCL_HOSTID"] = f"{host_prefix}-rank{rank}"
    return env


def nccl_environment(kit_env, *, net_role="net_plugin", kit=None, log_dir=None,
                     subsys="INIT,NET,ENV"):
    """The NCCL variables for a job through one of the kit's net plugins, or
    NCCL's own Socket transport (net_role None); with log_dir, NCCL's INFO
    log of the subsystems `subsys`, one file per process."""
    env = dict(kit_env)
    env["NCCL_SOCKET_IFNAME"] = "lo"
    env["NCCL_RESILIENT_SOCKET_IFNAME"] = "lo"
    if net_role is None:
        env["NCCL_NET_PLUGIN"] = "none"
        env["NCCL_NET"] = "Socket"
    else:
        env["NCCL_NET_PLUGIN"] = kit.path(net_role)
        env["NCCL_NET"] = NET_NAMES[net_role]
        # A process that makes communicators one after another (the probe,
        # the recovery step) must keep the plugin loaded: NCCL unloads it with
        # its last communicator and wipes its entry, name included, so the
        # next ncclNetInit looks for libnccl-net.so and, with NCCL_NET naming
        # ours, fails "Failed to initialize any NET plugin" (v2.28.9-1
        # src/plugin/net.cc ncclNetPluginFinalize, ncclNetPluginUnload's
        # memset; the count starts at NCCL_NET_PLUGIN_REF_COUNT,
        # initPluginLibsOnceFunc). The restart library and the Python package
        # set it for the same reason.
        env.setdefault("NCCL_NET_PLUGIN_REF_COUNT", "1")
    if log_dir is not None:
        env["NCCL_DEBUG"] = "INFO"
        env["NCCL_DEBUG_SUBSYS"] = subsys
        # %h host, %p pid: one file per process.
        env["NCCL_DEBUG_FILE"] = os.path.join(log_dir, "nccl-%h-%p.log")
    else:
        env.setdefault("NCCL_DEBUG", "WARN")
    return env


class Ranks:
    """Worker processes of one step, each in its own process group. A worker
    says it is ready by creating `<result>.ready` and reports by writing its
    JSON to `<result>` (worker_ready, worker_result): files, not pipes, so
    that a launcher never blocks on a worker's output."""

    def __init__(self, run_dir):
        self.run_dir = run_dir
        self.procs = []  # (rank, Popen, result path)

    def start(self, rank, argv, env, name):
        result = os.path.join(self.run_dir, f"{name}-rank{rank}.json")
        with open(os.path.join(self.run_dir, f"{name}-rank{rank}.log"), "ab") as log:
            p = subprocess.Popen(argv + ["--result", result], env=env, stdin=subprocess.DEVNULL,
                                 stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        self.procs.append((rank, p, result))
        return p

    def wait_ready(self, deadline):
        """True once every worker is ready; False if one exited first or the
        deadline passed."""
        while time.monotonic() < deadline:
            if all(os.path.exists(r + ".ready") for _, _, r in self.procs):
                return True
            if any(p.poll() is not None and not os.path.exists(r + ".ready") for _, p, r in self.procs):
                return False
            time.sleep(0.05)
        return False

    def wait_results(self, deadline, ranks=None):
        """{rank: result or None} for the given ranks (default all), waiting
        until each has reported or exited, or the deadline passed."""
        want = [t for t in self.procs if ranks is None or t[0] in ranks]
        while time.monotonic() < deadline:
            if all(os.path.exists(r) or p.poll() is not None for _, p, r in want):
                break
            time.sleep(0.05)
        out = {}
        for rank, p, r in want:
            try:
                with open(r) as f:
                    out[rank] = json.load(f)
            except (OSError, ValueError):
                out[rank] = None
        return out

    def exit_codes(self):
        return {rank: p.poll() for rank, p, _ in self.procs}

    def stop_all(self):
        for _, p, _ in self.procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signal.SIGCONT)
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        for _, p, _ in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop_all()


def worker_ready(result_path):
    with open(result_path + ".ready", "w"):
        pass


def read_json(path):
    """A JSON file's value, or None while it is missing or half-written."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def worker_result(result_path, payload):
    tmp = result_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(payload, f)
    os.replace(tmp, result_path)


def step_parser(description, max_seconds):
    """The arguments every step script that launches its own workers takes:
    the launcher's (--kit, --env-json, --out, --max-seconds) and a worker's
    (--worker, --result, --rank, --run-dir, --nccl-lib, --deadline); the
    script adds its own."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--worker", action="store_true")
    p.add_argument("--kit")
    p.add_argument("--env-json")
    p.add_argument("--out")
    p.add_argument("--max-seconds", type=float, default=max_seconds)
    p.add_argument("--result")
    p.add_argument("--rank", type=int)
    p.add_argument("--run-dir")
    p.add_argument("--nccl-lib")
    p.add_argument("--deadline", type=float, help="CLOCK_MONOTONIC seconds: the worker's end")
    return p


def where(e):
    """The innermost frames of an exception's traceback, one line: which
    phase of a worker failed ("latency:207 < member_worker:231")."""
    frames = traceback.extract_tb(e.__traceback__)[-3:]
    return " < ".join(f"{f.name}:{f.lineno}" for f in reversed(frames))


def worker_exit(code):
    """Ends a worker at once (os._exit: the CUDA context may still hold
    communicators NCCL is tearing down), its C streams flushed first: NCCL
    writes its INFO log (NCCL_DEBUG_FILE) with fwrite and never flushes it
    (v2.28.9-1 src/debug.cc ncclDebugLog), so without this the log lost its
    tail, the part that says where a worker stopped."""
    try:
        ctypes.CDLL(None).fflush(None)
    except OSError:
        pass
    os._exit(code)


def report_worker_error(a, text):
    """A worker's failure as its result file: {"rank", "error"}."""
    worker_result(a.result, {"rank": a.rank, "error": text})


def launcher_or_worker(p, worker, launch, on_failure=report_worker_error):
    """The entry point of a step script that is both its launcher and its
    workers: with --worker runs `worker(args)` (an exception goes to the
    launcher as `on_failure(args, text)`, never a hang), otherwise needs
    --kit, --env-json and --out, runs `launch(args)` and prints its report.
    Returns the exit status."""
    a = p.parse_args()
    if a.worker:
        try:
            worker(a)
        except Exception as e:  # reported, never a hang
            on_failure(a, f"{type(e).__name__}: {e} (at {where(e)})")
            worker_exit(1)
        return 0
    if not (a.kit and a.env_json and a.out):
        p.error("--kit, --env-json and --out are needed")
    report = launch(a)
    print(json.dumps(report, default=str))
    return 0 if report["ok"] else 1


def exchange(run_dir, name, rank, value, nranks, deadline):
    """Every rank's `value` (JSON), shared through files in run_dir."""
    path = os.path.join(run_dir, f"{name}.{rank}")
    worker_result(path, value)
    out = []
    for r in range(nranks):
        p = os.path.join(run_dir, f"{name}.{r}")
        while not os.path.exists(p):
            if time.monotonic() > deadline:
                raise TimeoutError(f"rank {r} did not publish {name}")
            time.sleep(0.01)
        with open(p) as f:
            out.append(json.load(f))
    return out


def assemble(build_dir, kit_dir, commit, dirty):
    """Copies the files of ROLES from a configured and built build directory
    into kit_dir/build/<the same relative path>, stripped of debug
    information, and writes kit_dir/manifest.json."""
    import shutil
    targets = json.loads(subprocess.run(["meson", "introspect", "--targets", build_dir], check=True,
                                        capture_output=True, text=True).stdout)
    by_name = {t["name"]: t for t in targets}
    if os.path.isdir(kit_dir):
        shutil.rmtree(kit_dir)
    files = {}
    for role, target in ROLES.items():
        t = by_name.get(target)
        if t is None:
            raise KitError(f"{build_dir} has no target {target} (for {role})")
        src = t["filename"][0]
        rel = os.path.join("build", os.path.relpath(src, os.path.abspath(build_dir)))
        dst = os.path.join(kit_dir, rel)
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        subprocess.run(["strip", "--strip-debug", "-o", dst, src], check=True)
        shutil.copymode(src, dst)
        files[role] = rel
        if t["type"] == "shared library":
            # The soname links the loader follows (libresilient-restart.so.0 ...).
            base = os.path.basename(src)
            for n in os.listdir(os.path.dirname(src)):
                p = os.path.join(os.path.dirname(src), n)
                if os.path.islink(p) and os.path.basename(os.path.realpath(p)) == base:
                    os.symlink(base, os.path.join(os.path.dirname(dst), n))
    manifest = {"commit": commit, "dirty": dirty,
                "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "files": files}
    with open(os.path.join(kit_dir, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    return Kit(kit_dir)


def _main(argv):
    import argparse
    p = argparse.ArgumentParser(description="assemble or check the GPU validation kit's carried set")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("assemble")
    s.add_argument("--build", required=True)
    s.add_argument("--kit", required=True)
    s.add_argument("--commit", default="unknown")
    s.add_argument("--dirty", action="store_true")
    c = sub.add_parser("check")
    c.add_argument("--kit", required=True)
    a = p.parse_args(argv)
    try:
        k = assemble(a.build, a.kit, a.commit, a.dirty) if a.cmd == "assemble" else Kit(a.kit)
    except KitError as e:
        print(f"kit: {e}")
        return 2
    problems, seen = check_dependencies(k)
    for name, path in sorted(seen["libraries"].items()):
        print(f"kit: ldd: {name} => {path}")
    print(f"kit: {seen['bytes']} bytes in {k.root}")
    for prob in problems:
        print(f"kit: PROBLEM: {prob}")
    return 1 if problems else 0


if __name__ == "__main__":
    import sys
    sys.exit(_main(sys.argv[1:]))
