#!/usr/bin/env python3
"""The job's health comparison on the GPU-less demo (issue 22): a straggler
is named, and a healthy job is not.

Runs the demo's job (8 ranks of resilient-demo-train, 6 active and 2 spares,
the restart library and its embedded store, host communicators through the
resilient plugin on loopback) for about --seconds, with
NCCL_RESILIENT_HEALTH_INTERVAL_MS at its default: every rank ships its
sample to the store each second and active rank 0 compares them.

  --straggler R   initial rank R computes --delay-ms longer at every step
                  (RESILIENT_DEMO_CHAOS=delay@startup): it must be named as
                  the straggler, within --bound seconds of its first step,
                  and nothing else may be reported; the job completes with
                  no restart.
  --slow-rank R   initial rank R's sending links are capped at --rate
                  (NCCL_RESILIENT_FAULT=kind=slow,dir=send for that rank;
                  each step all-reduces --payload-kb more): its link must be
                  named slow, within --bound seconds, and nothing else.
  (default)       a healthy run: every report is a false one and fails it.

Reports are counted from active rank 0's log (it logs each one it finds)
and from the ranks' timelines ("health report": the named rank records it).

usage: health_soak.py [--build DIR] [--seconds S] [--step-ms MS] [--payload-kb K]
                      [--straggler R --delay-ms D | --slow-rank R --rate R]
                      [--bound S] [--json FILE]
"""
import argparse
import json
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import demo  # noqa: E402  (scripts/demo.py: the processes, the store, the reports)

REPORT = re.compile(r"restart: ((slow link|straggler) .*)$")


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.path.join(demo.REPO, "build"))
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--step-ms", type=int, default=50)
    ap.add_argument("--straggler", type=int)
    ap.add_argument("--delay-ms", type=int, default=100)
    ap.add_argument("--slow-rank", type=int)
    ap.add_argument("--rate", default="2M", help="--slow-rank: bytes/s (fault spec syntax)")
    ap.add_argument("--payload-kb", type=int, default=256)
    ap.add_argument("--restart", action="store_true",
                    help="with --straggler or --slow-rank: the report's action is restart "
                         "(the rank must be replaced by a spare, once, and the job complete)")
    ap.add_argument("--bound", type=float, default=20.0,
                    help="the straggler must be named this long after the job started")
    ap.add_argument("--json")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    for name in ("straggler", "slow_rank"):
        value = getattr(args, name)
        if value is not None and not 0 <= value < demo.ACTIVE:
            ap.error(f"--{name.replace('_', '-')} must be an active rank (0..{demo.ACTIVE - 1})")
    if args.straggler is not None and args.slow_rank is not None:
        ap.error("one of --straggler and --slow-rank")
    if args.restart and args.straggler is None and args.slow_rank is None:
        ap.error("--restart needs --straggler or --slow-rank")
    return args


def check_named(what, subject, reports, entries, started_wall, args):
    """The one report the run expects: `what` ("slow link" or "straggler")
    naming `subject`, and nothing else; in the subject's timeline (unless
    replaced: its process ends first) within --bound seconds."""
    problems = []
    want = f"{what} from rank {subject} " if what == "slow link" else f"straggler rank {subject} "
    if not [rep for rep in reports if rep["text"].startswith(want)]:
        problems.append(f"rank {subject} was not named ({what})")
    others = [rep for rep in reports if not rep["text"].startswith(want)]
    if others:
        problems.append(f"{len(others)} other report(s)")
    if args.restart:
        return problems
    if not entries:
        problems.append(f"rank {subject}'s timeline has no health report")
        return problems
    after = (entries[0]["wall_ns"] - started_wall) / 1e9
    print(f"{what} named in rank {subject}'s timeline {after:.1f} s after the job started")
    if after > args.bound:
        problems.append(f"named after {after:.1f} s > {args.bound} s")
    return problems


def main():
    args = parse_args()
    binary = os.path.join(args.build, "demo", "resilient-demo-train")
    store_bin = os.path.join(args.build, "tools", "store", "resilient-store")
    plugin = os.path.join(args.build, "plugin", "net", "abi", "libnccl-net-resilient.so")
    monitor = os.path.join(args.build, "restart", "monitor", "resilient-monitor")
    missing = [b for b in (binary, store_bin, plugin, monitor) if not os.path.exists(b)]
    if missing:
        print("health_soak: missing " + ", ".join(missing) + " (build first)", file=sys.stderr)
        return 2
    # Steps for about --seconds: each takes the step time plus the all-reduce.
    step_s = (args.step_ms + (args.delay_ms if args.straggler is not None else 0) + 5) / 1000
    if args.slow_rank is not None:  # the capped link carries 2 (n-1)/n of the payload a step
        rate = float(args.rate.rstrip("kKMG")) * {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9}.get(
            args.rate[-1], 1)
        step_s += 2 * (demo.ACTIVE - 1) / demo.ACTIVE * args.payload_kb * 1024 / rate
    steps = max(50, int(args.seconds / step_s))
    run_dir = tempfile.mkdtemp(prefix="resilient-health-")
    procs = demo.Processes(run_dir, tempfile.mkdtemp(prefix="resilient-health-bb-",
                                                     dir="/dev/shm"))
    env = dict(os.environ, NCCL_RESILIENT_JOB_TOKEN=os.urandom(16).hex(),
               NCCL_RESILIENT_SOCKET_IFNAME="lo", NCCL_RESILIENT_BLACKBOX_DIR=procs.blackbox_dir)
    if args.straggler is not None:
        env.update(RESILIENT_DEMO_CHAOS="delay@startup",
                   RESILIENT_DEMO_CHAOS_RANK=str(args.straggler),
                   RESILIENT_DEMO_CHAOS_DELAY_MS=str(args.delay_ms))
    print(f"run dir {run_dir}, blackboxes in {procs.blackbox_dir}", flush=True)
    if args.restart:
        env.update(NCCL_RESILIENT_STRAGGLER_ACTION="restart",
                   NCCL_RESILIENT_SLOW_LINK_ACTION="restart")
    rank_env = {}
    if args.slow_rank is not None:
        rank_env[args.slow_rank] = {"NCCL_RESILIENT_FAULT":
                                    f"kind=slow,dir=send,rate={args.rate}"}
    problems = []
    reports = []
    started_wall = time.time_ns()
    try:
        store, url = demo.start_store(procs, store_bin, run_dir, env)
        job_dir = os.path.join(run_dir, "job")
        os.makedirs(job_dir)
        argv = [binary, f"--run-dir={job_dir}", f"--steps={steps}", "--checkpoint-every=50",
                f"--step-ms={args.step_ms}", f"--shards={demo.ACTIVE}", "--plugin=" + plugin,
                "--monitor=" + monitor, f"--payload-kb={args.payload_kb}"]
        ranks = [procs.start(argv, os.path.join(job_dir, f"rank-{r}.log"),
                             dict(env, RANK=str(r), WORLD_SIZE=str(demo.WORLD_SIZE),
                                  LOCAL_RANK=str(r), NCCL_RESILIENT_STORE_URL=url,
                                  NCCL_RESILIENT_RESTART_JOB="health", **rank_env.get(r, {})))
                 for r in range(demo.WORLD_SIZE)]
        deadline = time.monotonic() + args.seconds * 3 + 120
        for p in ranks:
            p.wait(timeout=max(1, deadline - time.monotonic()))
        elapsed = (time.time_ns() - started_wall) / 1e9
        subject = args.straggler if args.straggler is not None else args.slow_rank
        if args.restart:
            # The subject is the culprit of the one restart: terminated, its
            # place taken by a spare; everybody else completes.
            bad = [r for r, p in enumerate(ranks) if r != subject and p.returncode != 0]
            if bad or ranks[subject].returncode == 0:
                problems.append(f"expected rank {subject} replaced and the others completed: "
                                f"{demo.ending_summary(ranks)}")
        elif any(p.returncode != 0 for p in ranks):
            problems.append(f"the job failed: {demo.ending_summary(ranks)}")
        for r in range(demo.WORLD_SIZE):
            with open(os.path.join(job_dir, f"rank-{r}.log"), errors="replace") as f:
                for line in f:
                    m = REPORT.search(line.rstrip("\n"))
                    if m:
                        reports.append({"logged_by": r, "kind": m.group(2), "text": m.group(1)})
        named = {}
        for r, rep in demo.load_reports(job_dir).items():
            entries = [e for e in rep.get("timeline", []) if e["phase"] == "health report"]
            if entries:
                named[r] = entries
            faults = [e for e in rep.get("timeline", []) if e["phase"] == "fault detected"]
            culprits = [e["detail"] for e in rep.get("timeline", []) if e["phase"] == "culprits"]
            if not args.restart and faults:
                problems.append(f"rank {r}: a fault was detected (the job restarted)")
            if args.restart and r != subject:
                if len(faults) != 1 or culprits != [f"ranks {subject}"]:
                    problems.append(f"rank {r}: faults {[e['detail'] for e in faults]}, "
                                    f"culprits {culprits}: not one restart naming rank {subject}")
        compared = [e["detail"] for e in demo.load_reports(job_dir).get(0, {}).get("timeline", [])
                     if e["phase"] == "health compared"]
        print("active rank 0 compared: " + ("; ".join(compared) or "nothing"))
        m = re.match(r"(\d+) rounds, (\d+) samples, (\d+) link windows, (\d+) collectives",
                     compared[0] if compared else "")
        if not m or int(m.group(4)) == 0:
            problems.append("active rank 0 compared no collectives (the test would prove "
                            "nothing)")
        if subject is None:
            if reports:
                problems.append(f"{len(reports)} report(s) on a healthy run")
        else:
            what = "slow link" if args.slow_rank is not None else "straggler"
            problems += check_named(what, subject, reports, named.get(subject, []),
                                    started_wall, args)
        for rep in reports:
            print(f"report (rank {rep['logged_by']}'s log): {rep['text']}")
        print(f"{steps} steps in {elapsed:.1f} s; {len(reports)} report(s)")
    except (demo.DemoFailure, OSError) as e:
        problems.append(str(e))
    finally:
        procs.stop_all()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"straggler": args.straggler, "delay_ms": args.delay_ms,
                       "seconds": args.seconds, "reports": reports, "problems": problems}, f,
                      indent=2)
    if problems:
        print("FAIL: " + "; ".join(problems) + f" (files in {run_dir})")
        return 1
    if not args.keep:
        shutil.rmtree(run_dir, ignore_errors=True)
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
