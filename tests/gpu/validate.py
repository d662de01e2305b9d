"""The GPU validation kit's driver (scripts/gpu/validate.sh; docs/gpu-validation.md).

Runs the plan below, each step a subprocess with its own time budget (the sum
at most PLAN_LIMIT_S), and writes into --out: report.json, report.md,
logs.tar.gz (every step's output and the NCCL logs) and, from the recordings
step, recordings.tar.gz. A failing step does not stop the kit: every step
runs and the report says what each proved. Exit status: 0 every step passed,
1 a step failed or ran out of time, 2 bad usage or an unusable kit, 77 no GPU
(nothing ran but the checks that need none).

--dry-run runs what needs no GPU (arguments, the kit's ldd check, the plan,
the report writer, the environment step, which skips) and marks every other
step "not run (dry run)"; --print-plan lists the steps and their budgets.
"""

import argparse
import datetime
import json
import os
import shutil
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
PLAN_LIMIT_S = 560


class Step:
    def __init__(self, name, budget_s, proves, argv=None, needs_gpu=True, derived_from=(),
                 on_request=False):
        self.name = name
        self.budget_s = budget_s
        self.proves = proves
        self.argv = argv  # function(ctx) -> argv; None: computed from other steps
        self.needs_gpu = needs_gpu
        self.derived_from = derived_from
        # Not in the default plan (its budget would not fit a device call
        # beside the others): run with --only NAME.
        self.on_request = on_request


def py(script, *args):
    return [sys.executable, os.path.join(HERE, script), *args]


def demo_argv(ctx):
    env = ctx["env"]
    argv = [sys.executable, os.path.join(REPO, "scripts", "demo.py"), "--build", ctx["kit"].build_dir,
            "--nccl", "--job-timeout", "60"]
    if env.get("cudart_library"):
        argv.append(f"--cuda-library={env['cudart_library']}")
    return argv


def pytorch_demo_argv(ctx):
    """The torch example under the Python package, NCCL through our plugin on
    the one GPU (scripts/demo.py --pytorch --nccl), in a short configuration."""
    env = ctx["env"]
    argv = [sys.executable, os.path.join(REPO, "scripts", "demo.py"), "--build", ctx["kit"].build_dir,
            "--pytorch", "--nccl", "--python", sys.executable, "--job-timeout", "40",
            "--steps", "60", "--kill-at", "15", "--stop-at", "40"]
    if env.get("cudart_library"):
        argv.append(f"--cuda-library={env['cudart_library']}")
    return argv


PLAN = [
    Step("environment", 15, "GPU, driver, CUDA runtime, the NCCL torch loads and its path, RDMA devices",
         lambda c: py("environment.py", "--out", c["env_json"]), needs_gpu=False),
    Step("kit", 10, "the carried set needs nothing but glibc, the compiler runtime and its own libraries "
         "(ldd), and fits the 64 MiB that can be carried", needs_gpu=False),
    Step("collectives-2", 50, "2 ranks, torch.distributed over NCCL through our plugin: all_reduce, all_gather, "
         "reduce_scatter, broadcast, send/recv, 8 B-64 MiB, values checked; NCCL's log shows our plugin "
         "selected and every connection through it",
         lambda c: py("collectives.py", "--ranks", "2", "--seconds", "45", *c["common"])),
    Step("collectives-4", 45, "the same with 4 ranks",
         lambda c: py("collectives.py", "--ranks", "4", "--seconds", "40", *c["common"])),
    Step("profiler", 0, "our profiler (from the same .so) lists every communicator NCCL created, every "
         "collective completed (resilient-inspect --json); its data come from the two steps above",
         derived_from=("collectives-2", "collectives-4")),
    Step("fault-sigkill", 30, "a rank SIGKILLed in an all-reduce loop: every survivor errors at once, the WARN "
         "names its pid, ncclCommAbort < 1 s",
         lambda c: py("faults.py", "--case", "sigkill", *c["common"])),
    Step("fault-sigstop", 30, "a rank SIGSTOPped: every survivor errors within the liveness timeout",
         lambda c: py("faults.py", "--case", "sigstop", *c["common"])),
    Step("fault-stall", 35, "NCCL_RESILIENT_FAULT stall on one rank: errors within the progress timeout",
         lambda c: py("faults.py", "--case", "stall", *c["common"])),
    Step("fault-error", 30, "NCCL_RESILIENT_FAULT error on one rank: NCCL passes the plugin's test() error on",
         lambda c: py("faults.py", "--case", "error", *c["common"])),
    Step("demo-nccl", 130, "the restart library on real NCCL: scripts/demo.py --nccl re-forms the job after a "
         "kill and a freeze, and the weights match the fault-free run", demo_argv),
    Step("demo-pytorch-nccl", 100, "the Python package with torch.distributed on NCCL through our plugin: "
         "scripts/demo.py --pytorch --nccl re-forms the job after a kill and a freeze, weights match",
         pytorch_demo_argv),
    Step("bandwidth", 35, "busbw of a 2-rank all-reduce, 1-256 MiB: NCCL Socket vs plain TCP plugin vs "
         "resilient(TCP)", lambda c: py("bandwidth.py", "--seconds-per-transport", "10", *c["common"])),
    Step("recovery-timing", 90, "NCCL's recovery APIs timed against abort + re-init on the one GPU, 2, 4 "
         "and 8 members plus a spare: abort+ncclCommInitRankConfig, revoke+ncclCommShrink, "
         "+ncclCommGrow with the spare, each to its first all-reduce (table for docs/performance.md); "
         "on request: --only environment,recovery-timing",
         lambda c: py("recovery.py", "--max-seconds", "25", *c["common"]), on_request=True),
    Step("recordings", 30, "real net-plugin call sequences and profiler event streams, recorded through "
         "libnccl-resilient-recorder.so", lambda c: py("collectives.py", "--ranks", "2", "--record",
                                                        "--seconds", "28", *c["common"])),
]


def plan_seconds(plan=PLAN):
    """The default plan's budgets (steps on request excluded)."""
    return sum(s.budget_s for s in plan if not s.on_request)


def print_plan():
    print(f"{'step':<15} {'budget':>7}  what it proves")
    for s in PLAN:
        print(f"{s.name:<15} {s.budget_s:>5} s  {'(on request) ' if s.on_request else ''}{s.proves}")
    print(f"{'total':<15} {plan_seconds():>5} s  (limit {PLAN_LIMIT_S} s)")


def last_json_line(text):
    for line in reversed(text.strip().splitlines()):
        line = line.strip()
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def run_step(step, ctx, log_dir):
    """{'status': pass|fail|skipped|timeout, 'seconds', 'details', 'problems'}."""
    argv = step.argv(ctx)
    log_path = os.path.join(log_dir, f"{step.name}.log")
    env = dict(os.environ, PYTHONUNBUFFERED="1", LD_LIBRARY_PATH=ctx["ld_library_path"])
    # A step's temporary folders (the demo's run folder, kept on failure) land
    # under the log folder, so that logs.tar.gz brings them back.
    env["TMPDIR"] = tempfile.mkdtemp(prefix=f"{step.name}-", dir=log_dir)
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(argv) + "\n")
        log.flush()
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                             start_new_session=True, cwd=REPO)
        try:
            out, _ = p.communicate(timeout=step.budget_s)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, 9)
            out, _ = p.communicate()
            timed_out = True
        log.write(out)
    seconds = time.monotonic() - t0
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
    return {"status": status, "seconds": round(seconds, 1), "details": details, "problems": problems}


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
    bw = next((s for s in report["steps"] if s["name"] == "bandwidth" and s["details"].get("table")), None)
    if bw:
        lines += ["", "## Bandwidth (2 ranks, all_reduce)", "", bw["details"]["table"]]
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
                if n.endswith((".log", ".json")) and os.path.getsize(path) < 8 * 2**20:
                    tar.add(path, arcname=os.path.relpath(path, log_dir))


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
    ctx = {"kit": k, "env_json": os.path.join(log_dir, "environment.json"), "env": {}}
    ctx["common"] = ["--kit", k.root, "--env-json", ctx["env_json"], "--out", log_dir]
    ctx["ld_library_path"] = ":".join(k.library_dirs() + [os.environ.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    results, gpu = {}, None
    for step in PLAN:
        if (a.only and step.name not in a.only) or (step.on_request and not a.only):
            continue
        if step.name == "kit":
            t0 = time.monotonic()
            problems, seen = kitlib.check_dependencies(k)
            r = {"status": "pass" if not problems else "fail", "seconds": round(time.monotonic() - t0, 1),
                 "details": seen, "problems": problems}
        elif step.derived_from:
            r = derive_profiler(results)
        elif step.needs_gpu and (a.dry_run or gpu is False):
            r = {"status": "not run (dry run)" if a.dry_run else "skipped (no GPU)", "seconds": 0,
                 "details": {}, "problems": []}
        else:
            r = run_step(step, ctx, log_dir)
            if step.name == "environment":
                try:
                    with open(ctx["env_json"]) as f:
                        ctx["env"] = json.load(f)
                except (OSError, ValueError):
                    ctx["env"] = {}
                report["environment"] = ctx["env"]
                gpu = r["status"] == "pass"
                if not gpu and "skip" in ctx["env"]:
                    r["problems"].append(ctx["env"]["skip"])
                env = ctx["env"]
                extra = [os.path.dirname(env[key]) for key in ("nccl_library", "cudart_library") if env.get(key)]
                ctx["ld_library_path"] = ":".join(extra + [ctx["ld_library_path"]])
        results[step.name] = r
        report["steps"].append({"name": step.name, "budget_s": step.budget_s, "proves": step.proves, **r})
        print(f"validate: {step.name:<15} {r['status']:<18} {r['seconds']:>6} s"
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
