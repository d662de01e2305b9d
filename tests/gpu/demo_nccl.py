"""The kit's first step: the restart demo on real NCCL (scripts/demo.py
--nccl), with the environment facts gathered first.

1. environment.py writes --env-json (GPU, driver, the NCCL and CUDA runtime
   torch loads); without a GPU this step exits 77 and the kit skips the rest.
2. scripts/demo.py --nccl --keep runs the 8-rank job twice (fault-free, then
   a kill and a freeze), every rank's NCCL logging INIT and COLL into this
   step's folder (NCCL_DEBUG_FILE), the run folder kept for the logs.
3. NCCL's logs must show every communicator's collectives launched: a
   communicator whose calls all log opCount 0 was never launched (the
   thread was left inside a group by an ncclCommDestroy that returned early,
   `init.cc:2381 -> 6` on 2.28.9: nccl_log.launch_problems).

It passes when the demo passes (weights equal, culprits named) and the logs
show no communicator that never launched and no destroy trap. The last line
of stdout is the JSON summary.

`python3 demo_nccl.py --kit DIR --env-json FILE --out DIR [--job-timeout S]`
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
import kit as kitlib  # noqa: E402
import nccl_log  # noqa: E402

SKIPPED = 77
ENVIRONMENT_TIMEOUT_S = 25


def demo_environment(base, envinfo, log_dir):
    """The demo's environment: the NCCL and CUDA runtime torch uses found
    first, NCCL's INFO log of INIT and COLL, one file per process."""
    env = dict(base)
    extra = [os.path.dirname(envinfo[key]) for key in ("nccl_library", "cudart_library") if envinfo.get(key)]
    env["LD_LIBRARY_PATH"] = ":".join(extra + [base.get("LD_LIBRARY_PATH", "")]).rstrip(":")
    env["NCCL_DEBUG"] = "INFO"
    env["NCCL_DEBUG_SUBSYS"] = "INIT,COLL"
    env["NCCL_DEBUG_FILE"] = os.path.join(log_dir, "nccl-%h-%p.log")
    return env


def demo_argv(kit, envinfo, job_timeout):
    argv = [sys.executable, os.path.join(REPO, "scripts", "demo.py"), "--build", kit.build_dir,
            "--nccl", "--keep", "--job-timeout", str(job_timeout)]
    if envinfo.get("cudart_library"):
        argv.append(f"--cuda-library={envinfo['cudart_library']}")
    return argv


def read_logs(log_dir):
    logs = {}
    for path in sorted(glob.glob(os.path.join(log_dir, "nccl-*.log"))):
        with open(path, errors="replace") as f:
            logs[os.path.basename(path)] = f.read()
    return logs


def judge(demo_exit, demo_tail, logs, nccl_version):
    """(ok, problems, launch summary)."""
    problems = []
    if demo_exit != 0:
        problems.append(f"scripts/demo.py --nccl exited {demo_exit}: " + " | ".join(demo_tail[-3:]))
    launch, summary = nccl_log.launch_problems(logs, nccl_version)
    problems += launch
    return not problems, problems, summary


def parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--kit", required=True)
    p.add_argument("--env-json", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--job-timeout", type=float, default=50)
    return p


def main():
    p = parser()
    a = p.parse_args()
    k = kitlib.Kit(a.kit)
    t0 = time.monotonic()
    try:
        env_step = subprocess.run([sys.executable, os.path.join(HERE, "environment.py"), "--out", a.env_json],
                                  capture_output=True, text=True, timeout=ENVIRONMENT_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        print(json.dumps({"ok": False, "problems": [f"environment.py did not end within {ENVIRONMENT_TIMEOUT_S} s"]}))
        return 1
    try:
        with open(a.env_json) as f:
            envinfo = json.load(f)
    except (OSError, ValueError) as e:
        print(json.dumps({"ok": False, "problems": [f"environment.py wrote no JSON ({e}): "
                                                    f"{env_step.stderr.strip()[-300:]}"]}))
        return 1
    env_seconds = round(time.monotonic() - t0, 1)
    if env_step.returncode == SKIPPED or "skip" in envinfo:
        print(json.dumps({"ok": False, "skipped": envinfo.get("skip"), "problems": [envinfo.get("skip", "")]}))
        return SKIPPED
    log_dir = os.path.join(a.out, "demo-nccl-logs")
    os.makedirs(log_dir, exist_ok=True)
    argv = demo_argv(k, envinfo, a.job_timeout)
    print("$ " + " ".join(argv), flush=True)
    demo = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            env=demo_environment(os.environ, envinfo, log_dir), cwd=REPO)
    tail = []
    for line in demo.stdout:
        sys.stdout.write(line)
        tail = (tail + [line.strip()])[-20:]
    demo_exit = demo.wait()
    sys.stdout.flush()
    logs = read_logs(log_dir)
    ok, problems, summary = judge(demo_exit, [t for t in tail if t], logs, envinfo.get("nccl_version"))
    print(json.dumps({"ok": ok, "problems": problems, "demo_exit": demo_exit,
                      "environment_seconds": env_seconds, "nccl_version": envinfo.get("nccl_version"),
                      "nccl_logs": log_dir, "launch": summary, "table": launch_table(summary)}))
    if demo_exit == SKIPPED:
        return SKIPPED
    return 0 if ok else 1


def launch_table(summary):
    """Markdown: the communicators made after each process's first (the
    restarts'), whether their collectives launched."""
    lines = [f"{summary['communicators']} communicators in {summary['processes']} NCCL logs: "
             f"{summary['launched']} launched, {summary['one_call']} with one call, "
             f"{summary['never_launched']} never launched; destroy-trap lines: "
             f"{summary['destroy_trap_lines'] if summary['destroy_trap_lines'] is not None else 'unknown for this NCCL'}",
             "", "| log | comm | rank/nranks | calls | max opCount | verdict |", "|---|---|---|---:|---:|---|"]
    for c in summary["after_first"]:
        lines.append(f"| {c['log']} | {c['comm']} | {c['rank']}/{c['nranks']} | {c['calls']} | "
                     f"{c['max_op_count']} | {c['verdict']} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
