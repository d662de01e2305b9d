"""Correctness through our plugin under real NCCL: torch.distributed with the
NCCL backend, N processes on the one GPU, each its own NCCL host
(NCCL_HOSTID), NCCL_NET_PLUGIN=<the kit's libnccl-net-resilient.so>,
NCCL_NET=Resilient. all_reduce, all_gather, reduce_scatter, broadcast and a
ring of send/recv for 8 B to 64 MiB, every value checked. Then the checks of
what NCCL and our profiler saw: the INFO log shows our plugin selected and
every connection through it; `resilient-inspect --json`, run by each rank on
itself before it destroys its process group, lists every communicator NCCL
created with every collective completed.

With --record the same job runs through the recording shim
(libnccl-resilient-recorder.so as net and profiler plugin, forwarding to ours)
on fewer sizes, and the recordings are packed into the output folder.

Launcher: `python3 collectives.py --ranks N --kit DIR --env-json FILE --out DIR [--record]`
Worker:   `python3 collectives.py --worker ...` (started by the launcher)
"""

import argparse
import datetime
import glob
import json
import os
import secrets
import subprocess
import sys
import tarfile
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kit as kitlib  # noqa: E402
import nccl_log  # noqa: E402

SIZES = [8, 1024, 64 * 1024, 1024 * 1024, 16 * 1024 * 1024, 64 * 1024 * 1024]
RECORD_SIZES = [8, 64 * 1024, 1024 * 1024]


def expected_patterns(torch, count, n, rank):
    """The inputs and expected outputs of each operation for this rank."""
    base = torch.arange(count, device="cuda", dtype=torch.float32) % 1024
    full = torch.arange(count * n, device="cuda", dtype=torch.float32) % 1024
    sum_ranks = float(n * (n - 1) // 2)
    return {
        "all_reduce": (base + rank, base * n + sum_ranks),
        "broadcast": (base + rank, base + 0),
        "all_gather": (base + rank * 1000, torch.cat([base + r * 1000 for r in range(n)])),
        "reduce_scatter": (full + rank, full[rank * count:(rank + 1) * count] * n + sum_ranks),
        "send_recv": (base + rank * 7, base + ((rank - 1) % n) * 7),
    }


def run_ops(torch, dist, n, rank, sizes):
    """[(op, bytes, ok)] for every operation and size."""
    out = []
    for nbytes in sizes:
        count = max(1, nbytes // 4)
        pat = expected_patterns(torch, count, n, rank)
        t, want = pat["all_reduce"]
        t = t.clone()
        dist.all_reduce(t)
        out.append(("all_reduce", nbytes, bool(torch.equal(t, want))))
        t, want = pat["broadcast"]
        t = t.clone()
        dist.broadcast(t, src=0)
        out.append(("broadcast", nbytes, bool(torch.equal(t, want))))
        t, want = pat["all_gather"]
        got = torch.empty(count * n, device="cuda")
        dist.all_gather_into_tensor(got, t)
        out.append(("all_gather", nbytes, bool(torch.equal(got, want))))
        t, want = pat["reduce_scatter"]
        got = torch.empty(count, device="cuda")
        dist.reduce_scatter_tensor(got, t)
        out.append(("reduce_scatter", nbytes, bool(torch.equal(got, want))))
        t, want = pat["send_recv"]
        got = torch.empty(count, device="cuda")
        reqs = dist.batch_isend_irecv([dist.P2POp(dist.isend, t, (rank + 1) % n),
                                       dist.P2POp(dist.irecv, got, (rank - 1) % n)])
        for r in reqs:
            r.wait()
        torch.cuda.synchronize()
        out.append(("send_recv", nbytes, bool(torch.equal(got, want))))
    return out


def worker(a):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(0)
    store = dist.FileStore(os.path.join(a.run_dir, "store"), a.nranks)
    dist.init_process_group("nccl", store=store, rank=a.rank, world_size=a.nranks,
                            timeout=datetime.timedelta(seconds=120), device_id=torch.device("cuda", 0))
    t0 = time.monotonic()
    ops = run_ops(torch, dist, a.nranks, a.rank, RECORD_SIZES if a.record else SIZES)
    torch.cuda.synchronize()
    seconds = time.monotonic() - t0
    inspect = None
    if a.inspect:
        inspect = settled_inspect(a.inspect, time.monotonic() + SETTLE_S)
    dist.barrier()
    dist.destroy_process_group()
    kitlib.worker_result(a.result, {"rank": a.rank, "pid": os.getpid(), "ops": ops, "seconds": seconds,
                                    "inspect": inspect, "nccl_version": ".".join(map(str, torch.cuda.nccl.version()))})


# The GPU's part of a send can end before the proxy has put the last bytes on
# the wire: right after torch.cuda.synchronize() a p2p operation may still be
# in flight. The profiler's table must settle (nothing in flight) within this.
SETTLE_S = 5.0


def settled(table):
    return all(c["coll_completed"] == c["coll_enqueued"] and c["in_flight"] == 0
               for c in table.get("communicators", []))


def settled_inspect(inspect_binary, deadline):
    """resilient-inspect --json of this process, read until its profiler
    table has nothing in flight or the deadline passes; settle_ms says when."""
    bb = os.environ.get("NCCL_RESILIENT_BLACKBOX_DIR", "/dev/shm")
    t0 = time.monotonic()
    while True:
        p = subprocess.run([inspect_binary, "--json", "--dir", bb, str(os.getpid())],
                           capture_output=True, text=True, timeout=30)
        inspect = {"exit": p.returncode, "stderr": p.stderr[-2000:]}
        try:
            inspect["json"] = json.loads(p.stdout)
        except ValueError:
            inspect["stdout"] = p.stdout[-2000:]
            return inspect
        if settled(inspect["json"]) or time.monotonic() > deadline:
            inspect["settle_ms"] = round((time.monotonic() - t0) * 1000, 1)
            return inspect
        time.sleep(0.02)


def profiler_problems(result, comms_in_log):
    """Why our profiler's table in this rank's blackbox does not show every
    communicator of the log with every collective completed (empty: it does)."""
    ins = result.get("inspect")
    if ins is None or "json" not in ins:
        return [f"rank {result['rank']}: resilient-inspect gave no JSON (exit {ins and ins.get('exit')}: "
                f"{ins and ins.get('stderr', '').strip()[:300]})"]
    table = {c["comm_id"]: c for c in ins["json"].get("communicators", [])}
    problems = []
    for cid in sorted(comms_in_log):
        c = table.get(cid)
        if c is None:
            problems.append(f"rank {result['rank']}: communicator {cid:#x} is not in the profiler's table "
                            f"(it has {sorted(hex(k) for k in table)})")
            continue
        if c["coll_completed"] != c["coll_enqueued"] or c["in_flight"] != 0:
            problems.append(f"rank {result['rank']}: communicator {cid:#x}: {c['coll_completed']} of "
                            f"{c['coll_enqueued']} collectives completed, {c['in_flight']} in flight "
                            f"{SETTLE_S:g} s after the last operation's stream synchronised "
                            f"(p2p {c.get('p2p_completed', '?')} of {c.get('p2p_enqueued', '?')} completed)")
    if not comms_in_log:
        problems.append(f"rank {result['rank']}: no communicator in NCCL's log")
    return problems


def launch(a):
    k = kitlib.Kit(a.kit)
    run_dir = tempfile.mkdtemp(prefix=f"collectives-{a.ranks}-", dir=a.out)
    bb_dir = tempfile.mkdtemp(prefix="resilient-gpukit-bb-", dir="/dev/shm")
    role = "recorder" if a.record else "net_plugin"
    base = kitlib.nccl_environment(os.environ, net_role=role, kit=k, log_dir=run_dir)
    base.update({"NCCL_RESILIENT_JOB_TOKEN": secrets.token_hex(16), "NCCL_RESILIENT_BLACKBOX_DIR": bb_dir,
                 "PYTHONUNBUFFERED": "1"})
    record_dir = None
    if a.record:
        record_dir = os.path.join(run_dir, "recordings")
        os.mkdir(record_dir)
        base.update({"NCCL_PROFILER_PLUGIN": k.path("recorder"),
                     "RESILIENT_RECORDER_DIR": record_dir,
                     "RESILIENT_RECORDER_NET_INNER": k.path("net_plugin"),
                     "RESILIENT_RECORDER_PROFILER_INNER": k.path("net_plugin")})
    argv = [sys.executable, os.path.abspath(__file__), "--worker", "--nranks", str(a.ranks),
            "--run-dir", run_dir, "--inspect", k.path("inspect")] + (["--record"] if a.record else [])
    with kitlib.Ranks(run_dir) as ranks:
        for r in range(a.ranks):
            ranks.start(r, argv + ["--rank", str(r)], kitlib.rank_environment(base, r), "worker")
        results = ranks.wait_results(time.monotonic() + a.seconds)
        codes = ranks.exit_codes()
    problems, prof_problems = [], []
    logs = {}
    for path in glob.glob(os.path.join(run_dir, "nccl-*.log")):
        pid = int(path.rsplit("-", 1)[1].split(".")[0])
        with open(path, errors="replace") as f:
            logs[pid] = f.read()
    ops_failed = []
    for rank in range(a.ranks):
        r = results.get(rank)
        if r is None:
            problems.append(f"rank {rank} reported nothing (exit {codes.get(rank)}; log "
                            f"{os.path.join(run_dir, f'worker-rank{rank}.log')})")
            continue
        ops_failed += [f"rank {rank} {op} {n} B" for op, n, ok in r["ops"] if not ok]
        text = logs.get(r["pid"], "")
        if not text:
            problems.append(f"rank {rank}: no NCCL log (NCCL_DEBUG_FILE) for pid {r['pid']}")
            continue
        problems += [f"rank {rank}: {p}" for p in nccl_log.plugin_problems(text, kitlib.NET_NAMES[role])]
        if not a.record:
            prof_problems += profiler_problems(r, nccl_log.comm_ids(text))
    if ops_failed:
        problems.append("wrong values: " + ", ".join(ops_failed[:20]))
    ok_results = [r for r in results.values() if r is not None]
    summary = {"ok": not problems, "ranks": a.ranks, "problems": problems,
               "profiler_problems": prof_problems, "run_dir": run_dir,
               "operations_checked": sum(len(r["ops"]) for r in ok_results),
               "seconds": max((r["seconds"] for r in ok_results), default=None),
               "nccl_version": ok_results[0]["nccl_version"] if ok_results else None}
    if not a.record and ok_results:
        summary["communicators"] = [
            {"rank": r["rank"], "comm_hex": c.get("comm_hex"), "coll_completed": c.get("coll_completed"),
             "completed_by_func": c.get("completed_by_func")}
            for r in ok_results for c in (r.get("inspect") or {}).get("json", {}).get("communicators", [])]
    if record_dir is not None:
        files = sorted(os.listdir(record_dir))
        if not any(f.startswith("net-") for f in files) or not any(f.startswith("profiler-") for f in files):
            problems.append(f"the recorder wrote {files or 'nothing'}: a net and a profiler recording "
                            "per rank were expected")
            summary["ok"] = False
        archive = os.path.join(a.out, "recordings.tar.gz")
        with tarfile.open(archive, "w:gz") as tar:
            tar.add(record_dir, arcname="recordings")
        summary["recordings"] = {"archive": archive, "files": files}
    return summary


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--kit")
    p.add_argument("--env-json")
    p.add_argument("--out")
    p.add_argument("--record", action="store_true")
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--result")
    p.add_argument("--rank", type=int)
    p.add_argument("--nranks", type=int)
    p.add_argument("--run-dir")
    p.add_argument("--inspect")
    a = p.parse_args()
    if a.worker:
        worker(a)
        return 0
    if not (a.kit and a.out):
        p.error("--kit and --out are needed")
    report = launch(a)
    print(json.dumps(report))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
