"""The GPU validation kit's driver (scripts/gpu/validate.sh; docs/gpu-validation.md).

Runs the plan below, each step a subprocess with its own time budget (the sum
at most PLAN_LIMIT_S: one device call), the restart demo on NCCL first, and
writes into --out: report.json, report.md, logs.tar.gz (every step's output,
the NCCL logs, the probes' JSON and tables) and, from the recordings step (on
request), recordings.tar.gz. A failing step does not stop the kit: every step
runs and the report says what each proved. A step that ends, on time or
over its budget, leaves no process behind: every process carrying the
step's marker is ended (SIGTERM, then SIGKILL) and the report names those it
found. Exit status: 0 every step passed, 1 a step failed or ran out of time,
2 bad usage or an unusable kit, 77 no GPU (nothing ran but the checks that
need none).

--dry-run runs what needs no GPU (arguments, the kit's ldd check, the plan,
the report writer, the environment step, which skips) and marks every other
step "not run (dry run)"; --print-plan lists the steps and their budgets.
"""

import argparse
import datetime
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import kit as kitlib  # noqa: E402

SKIPPED = 77
# One device call of at most 8 minutes: the default plan's budgets sum to at
# most this, and validate.py's own work (the sweeps, the report) fits in the
# rest of a call's 600 s.
PLAN_LIMIT_S = 480
# The largest timeout_s a device call takes (scripts/gpu/build_kit.sh prints it).
DEVICE_CALL_LIMIT_S = 600

# Every process of a step carries STEP_MARKER=<step>-<nonce> in its
# environment (exported to the step's launcher, inherited by what it starts)
# or the step's TMPDIR in its command line; a step that ends, on time or not,
# leaves none of them behind (end_step_processes).
STEP_MARKER = "RESILIENT_KIT_STEP"
SWEEP_GRACE_S = 3.0

# scripts/demo.py --nccl runs two jobs, each bounded by --job-timeout; with
# the environment gathered first (demo_nccl.py) and the demo's own start and
# end, they fit the step's budget (test_kit.py checks the sum).
DEMO_JOB_TIMEOUT_S = 50
DEMO_OVERHEAD_S = 20  # environment (torch, CUDA), --check-cuda, the store, the leftover wait, the log check
PYTORCH_DEMO_JOB_TIMEOUT_S = 40
PYTORCH_DEMO_OVERHEAD_S = 15


class Step:
    def __init__(self, name, budget_s, proves, argv=None, needs_gpu=True, derived_from=(),
                 on_request=False, gathers_environment=False):
        self.name = name
        self.budget_s = budget_s
        self.proves = proves
        self.argv = argv  # function(ctx) -> argv; None: computed from other steps
        self.needs_gpu = needs_gpu
        self.derived_from = derived_from
        # Not in the default plan (proven by earlier GPU runs and unchanged
        # since, or too long for one device call): run with --only NAME.
        self.on_request = on_request
        # Writes the environment step's JSON itself before its own work (the
        # first step of the plan: the environment step then only reads it).
        self.gathers_environment = gathers_environment


def py(script, *args):
    return [sys.executable, os.path.join(HERE, script), *args]


def demo_argv(ctx):
    """The restart demo on NCCL, the environment gathered first
    (demo_nccl.py), NCCL logging INIT and COLL for the launch check."""
    return py("demo_nccl.py", "--job-timeout", str(DEMO_JOB_TIMEOUT_S), *ctx["common"])


def pytorch_demo_argv(ctx):
    """The torch example under the Python package, NCCL through our plugin on
    the one GPU (scripts/demo.py --pytorch --nccl), in a short configuration."""
    env = ctx["env"]
    argv = [sys.executable, os.path.join(REPO, "scripts", "demo.py"), "--build", ctx["kit"].build_dir,
            "--pytorch", "--nccl", "--python", sys.executable, "--job-timeout", str(PYTORCH_DEMO_JOB_TIMEOUT_S),
            "--steps", "60", "--kill-at", "15", "--stop-at", "40"]
    if env.get("cudart_library"):
        argv.append(f"--cuda-library={env['cudart_library']}")
    return argv


def rank_faults_argv(ctx):
    """scripts/bench_rank_faults.py --nccl: one SIGSTOP and one busy rank."""
    env = ctx["env"]
    argv = [sys.executable, os.path.join(REPO, "scripts", "bench_rank_faults.py"), "--build",
            ctx["kit"].build_dir, "--nccl", "--python", sys.executable, "--trials", "1",
            "--faults", "stop", "busy", "--json", os.path.join(ctx["out"], "rank_faults.json")]
    if env.get("cudart_library"):
        argv.append(f"--cuda-library={env['cudart_library']}")
    return argv


PLAN = [
    Step("demo-nccl", 2 * DEMO_JOB_TIMEOUT_S + DEMO_OVERHEAD_S,
         "the restart library on real NCCL: scripts/demo.py --nccl re-forms the job after a kill and a "
         "freeze and the weights match the fault-free run; NCCL's logs (INIT,COLL) show every "
         "communicator's collectives launched (a later call logs a non-zero opCount) and no "
         "ncclCommDestroy returning early (init.cc:2381 -> on 2.28.9). Gathers the environment first",
         demo_argv, gathers_environment=True),
    Step("environment", 15, "GPU, driver, CUDA runtime, the NCCL torch loads and its path, RDMA devices "
         "(read from demo-nccl's gathering; run here only when that did not run)",
         lambda c: py("environment.py", "--out", c["env_json"]), needs_gpu=False),
    Step("kit", 10, "the carried set needs nothing but glibc, the compiler runtime and its own libraries "
         "(ldd), and fits the 64 MiB that can be carried", needs_gpu=False),
    Step("nccl-probe", 45, "real NCCL, recorded: the group depth after ncclCommDestroy of a revoked, errored "
         "communicator; SIGKILL, revoke, ncclCommShrink (code, NULL newcomm, the parent polled, the "
         "child); abort vs revoke+abort vs 4 parallel aborts; 8 B all-reduce latency, blocking vs "
         "non-blocking", lambda c: py("nccl_probe.py", "--max-seconds", "38", *c["common"])),
    Step("torch-watchdog", 36, "4 torch.distributed NCCL ranks, one SIGKILLed: with torch's defaults its "
         "watchdog's verdict on the survivors is recorded; with the Python package's settings every "
         "survivor lives", lambda c: py("torch_watchdog.py", "--max-seconds", "30", *c["common"])),
    Step("demo-pytorch-nccl", 2 * PYTORCH_DEMO_JOB_TIMEOUT_S + PYTORCH_DEMO_OVERHEAD_S,
         "the Python package with torch.distributed on NCCL through our plugin: scripts/demo.py --pytorch "
         "--nccl re-forms the job after a kill and a freeze, weights match", pytorch_demo_argv),
    Step("recovery-timing", 55, "NCCL's recovery APIs timed against abort + re-init, 4 and 8 members plus "
         "a spare: fault-free abort+init, revoke+shrink (the parent polled), +grow; after a real SIGKILL "
         "mid all-reduce: revoke, the shrink's result code, the fallback abort + full re-init "
         "(table for docs/performance.md)",
         lambda c: py("recovery.py", "--sizes", "4,8", "--max-seconds", "48", *c["common"])),
    Step("fault-sigkill", 28, "a rank SIGKILLed in an all-reduce loop: every survivor errors at once, the WARN "
         "names its pid, ncclCommAbort < 1 s",
         lambda c: py("faults.py", "--case", "sigkill", *c["common"])),
    Step("fault-sigstop", 28, "a rank SIGSTOPped: every survivor errors within the liveness timeout",
         lambda c: py("faults.py", "--case", "sigstop", *c["common"])),
    Step("collectives-4", 45, "4 ranks, torch.distributed over NCCL through our plugin: all_reduce, "
         "all_gather, reduce_scatter, broadcast, send/recv, 8 B-64 MiB, values checked; NCCL's log shows "
         "our plugin selected and every connection through it",
         lambda c: py("collectives.py", "--ranks", "4", "--seconds", "40", *c["common"])),
    Step("profiler", 0, "our profiler (from the same .so) lists every communicator NCCL created, every "
         "collective completed (resilient-inspect --json); its data come from collectives-4",
         derived_from=("collectives-4", "collectives-2")),
    # Proven by the first GPU runs (session 11) and untouched since: on request.
    Step("collectives-2", 50, "the collectives with 2 ranks", lambda c: py(
        "collectives.py", "--ranks", "2", "--seconds", "45", *c["common"]), on_request=True),
    Step("fault-stall", 35, "NCCL_RESILIENT_FAULT stall on one rank: errors within the progress timeout",
         lambda c: py("faults.py", "--case", "stall", *c["common"]), on_request=True),
    Step("fault-error", 30, "NCCL_RESILIENT_FAULT error on one rank: NCCL passes the plugin's test() error on",
         lambda c: py("faults.py", "--case", "error", *c["common"]), on_request=True),
    Step("bandwidth", 35, "busbw of a 2-rank all-reduce, 1-256 MiB: NCCL Socket vs plain TCP plugin vs "
         "resilient(TCP)", lambda c: py("bandwidth.py", "--seconds-per-transport", "10", *c["common"]),
         on_request=True),
    Step("rank-faults-nccl", 150, "issue 32 on real NCCL: the torch demo on NCCL through our plugins, a "
         "SIGSTOPped rank found by its monitor's liveness link and a busy rank named a stuck rank from "
         "the profiler's in-flight collectives (communicator, collective, function)",
         rank_faults_argv, on_request=True),
    Step("recordings", 30, "real net-plugin call sequences and profiler event streams, recorded through "
         "libnccl-resilient-recorder.so", lambda c: py("collectives.py", "--ranks", "2", "--record",
                                                        "--seconds", "28", *c["common"]), on_request=True),
]


def device_call_timeout():
    """The timeout_s to give the one device call that runs the default plan:
    its budgets' limit and a minute for validate.py's own work, never over
    what a call takes."""
    return min(PLAN_LIMIT_S + 60, DEVICE_CALL_LIMIT_S)


def plan_seconds(plan=PLAN):
    """The default plan's budgets (steps on request excluded)."""
    return sum(s.budget_s for s in plan if not s.on_request)


def print_plan():
    print(f"{'step':<18} {'budget':>7}  what it proves")
    for s in PLAN:
        if not s.on_request:
            print(f"{s.name:<18} {s.budget_s:>5} s  {s.proves}")
    print(f"{'total':<18} {plan_seconds():>5} s  (limit {PLAN_LIMIT_S} s; run it in one device call "
          f"with timeout_s {device_call_timeout()}, at most {DEVICE_CALL_LIMIT_S})")
    print("on request (--only NAME), not in the default plan:")
    for s in PLAN:
        if s.on_request:
            print(f"{s.name:<18} {s.budget_s:>5} s  {s.proves}")


def select_steps(only):
    """The steps to run, in plan order: the default plan, or the named ones
    plus the environment step when a named step needs the GPU and none of
    them gathers the environment."""
    if not only:
        return [s for s in PLAN if not s.on_request]
    chosen = [s for s in PLAN if s.name in only]
    if any(s.needs_gpu for s in chosen) and not any(s.gathers_environment or s.name == "environment"
                                                    for s in chosen):
        chosen = [s for s in PLAN if s.name in only or s.name == "environment"]
    return chosen


def last_json_line(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


# ---- the processes of a step

def _read(path, mode="rb"):
    try:
        with open(path, mode) as f:
            return f.read()
    except OSError:
        return None


def step_processes(marker, tmpdir):
    """[(pid, cmdline)] of the live processes (zombies excluded) whose
    environment carries STEP_MARKER=marker or whose command line names
    tmpdir; never this process."""
    me = os.getpid()
    needle = f"{STEP_MARKER}={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        stat = _read(f"/proc/{entry}/stat", "r")
        if stat is None or stat.rsplit(")", 1)[-1].split()[0] == "Z":
            continue
        cmdline = (_read(f"/proc/{entry}/cmdline") or b"").replace(b"\0", b" ").decode(errors="replace").strip()
        environ = _read(f"/proc/{entry}/environ") or b""
        if needle in environ.split(b"\0") or (tmpdir and tmpdir in cmdline):
            found.append((int(entry), cmdline))
    return found


def _signal(pid, sig, group=False):
    try:
        (os.killpg if group else os.kill)(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def end_step_processes(marker, tmpdir, launcher=None, grace_s=SWEEP_GRACE_S):
    """Ends every process of a step: SIGTERM (and SIGCONT, for a stopped
    one) to the launcher's process group and to each, up to grace_s for them
    to go, then SIGKILL to what is left. Returns {"left": [(pid, cmdline)]
    found running, "killed": [(pid, cmdline)] that needed SIGKILL}."""
    left = step_processes(marker, tmpdir)
    launcher_alive = launcher is not None and launcher.poll() is None
    if not left and not launcher_alive:
        return {"left": [], "killed": []}
    if launcher_alive:
        _signal(launcher.pid, signal.SIGTERM, group=True)
        _signal(launcher.pid, signal.SIGCONT, group=True)
    for pid, _ in left:
        _signal(pid, signal.SIGTERM)
        _signal(pid, signal.SIGCONT)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if not step_processes(marker, tmpdir) and (launcher is None or launcher.poll() is not None):
            break
        time.sleep(0.05)
    killed = step_processes(marker, tmpdir)
    for pid, _ in killed:
        _signal(pid, signal.SIGKILL)
    if launcher is not None and launcher.poll() is None:
        _signal(launcher.pid, signal.SIGKILL, group=True)
    deadline = time.monotonic() + 2
    while step_processes(marker, tmpdir) and time.monotonic() < deadline:
        time.sleep(0.05)
    return {"left": left, "killed": killed}


def gpu_apps():
    """`nvidia-smi --query-compute-apps=pid,used_memory --format=csv`, or None
    where there is no nvidia-smi."""
    if shutil.which("nvidia-smi") is None:
        return None
    try:
        p = subprocess.run(["nvidia-smi", "--query-compute-apps=pid,used_memory", "--format=csv"],
                           capture_output=True, text=True, timeout=15)
        return (p.stdout + p.stderr).strip()
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"nvidia-smi: {e}"


def run_step(step, ctx, log_dir):
    """{'status': pass|fail|skipped|timeout, 'seconds', 'details', 'problems',
    'processes' (what the sweep found), 'gpu_apps'}."""
    argv = step.argv(ctx)
    log_path = os.path.join(log_dir, f"{step.name}.log")
    marker = f"{step.name}-{secrets.token_hex(6)}"
    env = dict(os.environ, PYTHONUNBUFFERED="1", LD_LIBRARY_PATH=ctx["ld_library_path"])
    env[STEP_MARKER] = marker
    # A step's temporary folders (the demo's run folder, kept on failure) land
    # under the log folder, so that logs.tar.gz brings them back.
    tmpdir = tempfile.mkdtemp(prefix=f"{step.name}-", dir=log_dir)
    env["TMPDIR"] = tmpdir
    t0 = time.monotonic()
    # The launcher's stdout goes to a file, not a pipe: a process it leaves
    # behind cannot hold the step open until its budget runs out.
    out_path = os.path.join(tmpdir, "stdout.txt")
    with open(log_path, "w") as log, open(out_path, "w") as stdout:
        log.write("$ " + " ".join(argv) + "\n")
        log.flush()
        p = subprocess.Popen(argv, stdout=stdout, stderr=log, text=True, env=env,
                             start_new_session=True, cwd=REPO)
        try:
            p.wait(timeout=step.budget_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
        seconds = time.monotonic() - t0
        swept = end_step_processes(marker, tmpdir, launcher=p)
        p.wait()
    with open(out_path, errors="replace") as f:
        out = f.read()
    os.unlink(out_path)
    apps = gpu_apps()
    with open(log_path, "a") as log:
        log.write(out)
        if apps is not None:
            log.write("\n$ nvidia-smi --query-compute-apps=pid,used_memory --format=csv\n" + apps + "\n")
        for what in ("left", "killed"):
            for pid, cmd in swept[what]:
                log.write(f"validate: {what}: pid {pid}: {cmd}\n")
    details = last_json_line(out) or {}
    problems = list(details.get("problems", []))
    if timed_out:
        status = "timeout"
        problems.append(f"did not end within its budget of {step.budget_s} s")
    elif p.returncode == 0:
        status = "pass"
    elif p.returncode == SKIPPED:
        status = "skipped"
    else:
        status = "fail"
        if not problems:
            tail = out.strip().splitlines()[-3:]
            problems.append(f"exit {p.returncode}" + (": " + " | ".join(tail) if tail else f" (see {log_path})"))
    if swept["left"]:
        killed = {pid for pid, _ in swept["killed"]}
        text = "; ".join(f"pid {pid}{' (SIGKILL)' if pid in killed else ''}: {cmd[:120]}"
                         for pid, cmd in swept["left"])
        if timed_out:
            problems.append(f"ended {len(swept['left'])} processes of the step ({len(killed)} needed SIGKILL): {text}")
    return {"status": status, "seconds": round(seconds, 1), "details": details, "problems": problems,
            "processes": {k: [{"pid": pid, "cmdline": cmd} for pid, cmd in v] for k, v in swept.items()},
            "gpu_apps": apps}


def derive_profiler(results):
    problems, seen = [], False
    for name in ("collectives-2", "collectives-4"):
        r = results.get(name)
        if r is None or "profiler_problems" not in r["details"]:
            continue
        seen = True
        problems += [f"{name}: {p}" for p in r["details"]["profiler_problems"]]
        if not r["details"].get("communicators"):
            problems.append(f"{name}: no rank's profiler table lists a communicator")
    if not seen:
        return {"status": "not run", "seconds": 0, "details": {}, "problems": []}
    return {"status": "pass" if not problems else "fail", "seconds": 0, "details": {}, "problems": problems}


# The steps whose launcher prints a markdown table (details["table"]), and
# the heading the report gives it.
TABLES = {
    "demo-nccl": "demo-nccl: did every communicator's collectives launch (NCCL's COLL log)",
    "nccl-probe": "NCCL probe",
    "torch-watchdog": "PyTorch's watchdog and the survivors of a SIGKILL",
    "recovery-timing": "Recovery timing (for docs/performance.md)",
    "bandwidth": "Bandwidth (2 ranks, all_reduce)",
}


def markdown(report):
    lines = ["# GPU validation report", "",
             f"- kit: commit {report['kit'].get('commit')}, built {report['kit'].get('built')}",
             f"- started {report['started']}, {report['seconds']:.0f} s in all"]
    env = report.get("environment", {})
    for key in ("device", "nvidia_smi", "cuda_runtime", "torch", "nccl_version", "nccl_library", "kernel"):
        if key in env:
            value = env[key]["out"] if isinstance(env[key], dict) else env[key]
            lines.append(f"- {key}: {value}")
    if "rdma" in env:
        lines.append(f"- RDMA devices: {env['rdma'].get('sys_class_infiniband')}")
    lines += ["", "| step | status | seconds | budget | problems |", "|---|---|---:|---:|---|"]
    for s in report["steps"]:
        probs = "; ".join(s["problems"])[:400].replace("|", "/")
        lines.append(f"| {s['name']} | {s['status']} | {s['seconds']} | {s['budget_s']} | {probs} |")
    faults = [s for s in report["steps"] if s["name"].startswith("fault-") and s["details"].get("rows")]
    if faults:
        lines += ["", "## Faults", "", "| case | rank | error | detect ms | bound ms | abort ms | names culprit |",
                  "|---|---:|---|---:|---:|---:|---|"]
        for s in faults:
            d = s["details"]
            for r in d["rows"]:
                lines.append(f"| {d['case']} | {r['rank']} | {r.get('error')} | {r.get('detect_ms')} | "
                             f"{d['bound_ms']} | {r.get('abort_ms')} | {r.get('names_culprit', '')} |")
    for s in report["steps"]:
        if s["name"] in TABLES and s["details"].get("table"):
            lines += ["", f"## {TABLES[s['name']]}", "", s["details"]["table"]]
    left = [(s["name"], p, s["status"]) for s in report["steps"] for p in (s.get("processes") or {}).get("left", [])]
    if left:
        killed = {(s["name"], p["pid"]) for s in report["steps"] for p in (s.get("processes") or {}).get("killed", [])}
        lines += ["", "## Processes a step left running (ended by validate.py)", "",
                  "| step | status | pid | needed SIGKILL | command line |", "|---|---|---:|---|---|"]
        for name, p, status in left:
            lines.append(f"| {name} | {status} | {p['pid']} | {'yes' if (name, p['pid']) in killed else 'no'} | "
                         f"{p['cmdline'][:200].replace('|', '/')} |")
    apps = [(s["name"], s["gpu_apps"]) for s in report["steps"] if s.get("gpu_apps")]
    busy = [(name, text) for name, text in apps if len(text.strip().splitlines()) > 1]
    if busy:
        lines += ["", "## GPU processes right after a step (nvidia-smi --query-compute-apps)", ""]
        for name, text in busy:
            lines += [f"- {name}: " + "; ".join(text.strip().splitlines()[1:])]
    lines.append("")
    return "\n".join(lines)


def write_report(out_dir, report, log_dir):
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        json.dump(report, f, indent=1, default=str)
    with open(os.path.join(out_dir, "report.md"), "w") as f:
        f.write(markdown(report))
    with tarfile.open(os.path.join(out_dir, "logs.tar.gz"), "w:gz") as tar:
        for dirpath, _, names in os.walk(log_dir):
            for n in names:
                path = os.path.join(dirpath, n)
                if n.endswith((".log", ".json", ".md")) and os.path.getsize(path) < 8 * 2**20:
                    tar.add(path, arcname=os.path.relpath(path, log_dir))


def adopt_environment(ctx, report):
    """Reads the environment step's JSON (written by environment.py, or by
    demo-nccl before its demo) into ctx: True there is a GPU, False there is
    none, None nothing was written."""
    try:
        with open(ctx["env_json"]) as f:
            ctx["env"] = json.load(f)
    except (OSError, ValueError):
        ctx["env"] = {}
        return None
    report["environment"] = ctx["env"]
    env = ctx["env"]
    extra = [os.path.dirname(env[key]) for key in ("nccl_library", "cudart_library") if env.get(key)]
    ctx["ld_library_path"] = ":".join(extra + [ctx["ld_library_path"]])
    return "skip" not in env


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kit", default=os.path.join(REPO, "gpu-kit"), help="the carried set (default gpu-kit/)")
    p.add_argument("--out", help="folder for report.json, report.md, logs.tar.gz, recordings.tar.gz")
    p.add_argument("--dry-run", action="store_true", help="run only what needs no GPU")
    p.add_argument("--print-plan", action="store_true", help="list the steps and their budgets")
    p.add_argument("--only", help="comma-separated step names (default: all)")
    a = p.parse_args(argv)
    if not a.print_plan and not a.out:
        p.error("--out is needed")
    names = [s.name for s in PLAN]
    if a.only:
        a.only = a.only.split(",")
        unknown = [n for n in a.only if n not in names]
        if unknown:
            p.error(f"unknown steps {unknown}; the steps are {names}")
    return a


def main(argv=None):
    a = parse_args(argv)
    if plan_seconds() > PLAN_LIMIT_S:
        print(f"validate: the plan's budgets sum to {plan_seconds()} s, over {PLAN_LIMIT_S} s", file=sys.stderr)
        return 2
    if a.print_plan:
        print_plan()
        return 0
    os.makedirs(a.out, exist_ok=True)
    log_dir = tempfile.mkdtemp(prefix="gpukit-")
    t_start = time.monotonic()
    report = {"started": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "dry_run": a.dry_run, "plan_seconds": plan_seconds(), "steps": [], "kit": {}}
    try:
        k = kitlib.Kit(a.kit)
        report["kit"] = {key: k.manifest.get(key) for key in ("commit", "built", "dirty")}
    except kitlib.KitError as e:
        if not a.dry_run and shutil.which("nvidia-smi") is None:
            print(f"validate: skipped: no GPU here (nvidia-smi not found), and no kit: {e}", file=sys.stderr)
            return SKIPPED
        print(f"validate: {e}", file=sys.stderr)
        return 2
    ctx = {"kit": k, "env_json": os.path.join(log_dir, "environment.json"), "env": {},
           "out": log_dir}
    ctx["common"] = ["--kit", k.root, "--env-json", ctx["env_json"], "--out", log_dir]
    ctx["ld_library_path"] = ":".join(k.library_dirs() + [os.environ.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    results, gpu = {}, None
    for step in select_steps(a.only):
        if step.name == "kit":
            t0 = time.monotonic()
            problems, seen = kitlib.check_dependencies(k)
            r = {"status": "pass" if not problems else "fail", "seconds": round(time.monotonic() - t0, 1),
                 "details": seen, "problems": problems}
        elif step.derived_from:
            r = derive_profiler(results)
        elif step.name == "environment" and gpu is not None:
            # Gathered by demo-nccl before its demo.
            r = {"status": "pass" if gpu else "skipped", "seconds": 0,
                 "details": {"gathered_by": "demo-nccl"}, "problems": [] if gpu else [ctx["env"]["skip"]]}
        elif step.needs_gpu and (a.dry_run or gpu is False):
            r = {"status": "not run (dry run)" if a.dry_run else "skipped (no GPU)", "seconds": 0,
                 "details": {}, "problems": []}
        else:
            r = run_step(step, ctx, log_dir)
            if step.name == "environment" or step.gathers_environment:
                gathered = adopt_environment(ctx, report)
                if step.name == "environment":
                    gpu = r["status"] == "pass" and bool(gathered)
                    if not gpu and "skip" in ctx["env"]:
                        r["problems"].append(ctx["env"]["skip"])
                else:
                    gpu = gathered
        results[step.name] = r
        report["steps"].append({"name": step.name, "budget_s": step.budget_s, "proves": step.proves, **r})
        print(f"validate: {step.name:<18} {r['status']:<18} {r['seconds']:>6} s"
              + (f"  {r['problems'][0][:160]}" if r["problems"] else ""), flush=True)
    report["seconds"] = time.monotonic() - t_start
    statuses = [s["status"] for s in report["steps"]]
    write_report(a.out, report, log_dir)
    recordings = os.path.join(log_dir, "recordings.tar.gz")
    if os.path.exists(recordings):
        os.replace(recordings, os.path.join(a.out, "recordings.tar.gz"))
    print(f"validate: report in {a.out}/report.md and report.json", flush=True)
    if any(s in ("fail", "timeout") for s in statuses):
        return 1
    if gpu is False and not a.dry_run:
        return SKIPPED
    return 0


if __name__ == "__main__":
    sys.exit(main())
