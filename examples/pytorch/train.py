#!/usr/bin/env python3
"""A small data-parallel torch training job under nccl_resilient.

Every active rank computes the gradient of a linear model on its shard of a
synthetic data set, the gradients are summed with torch.distributed
(gloo on CPU, NCCL on a GPU), every rank takes the same SGD step; active
rank 0 writes a checkpoint every few steps inside ``ctx.atomic()``, and every
call of the function resumes from it. Run by ``scripts/demo.sh --pytorch``
(8 ranks, 2 of them spares) or alone:

    RANK=0 WORLD_SIZE=1 NCCL_RESILIENT_STORE_URL=memory \\
        python3 examples/pytorch/train.py --run-dir /tmp/run --shards 1

Prints one line per step ("step iteration=.. rank=.. active=.. step=..
loss=.. mono_ns=..") and writes <run-dir>/rank-<RANK>[.<N>].json (outcome,
timeline) and, on active rank 0, <run-dir>/weights.bin (the final weights,
raw float32). Exit status: 0 completed, 3 this rank was discarded, 4 the
job was aborted, 1 an error; under resilient-run 75, the rank left for a new
process. SIGUSR1 poisons the rank as a sticky CUDA error would (the agent
drill's poisoned contexts): its next step fails, and its health check then
says only a new process can use the GPU again.
"""

import argparse
import datetime
import json
import os
import signal
import sys
import threading
import time

import torch
import torch.distributed as dist

import nccl_resilient
from nccl_resilient import distributed as rdist

WEIGHTS = 64
SAMPLES_PER_SHARD = 256
LEARNING_RATE = 0.05
FIXED_ONE = float(1 << 32)  # the fixed-point unit of the sums


POISON = "CUDA error: an illegal memory access was encountered (simulated: SIGUSR1)"
poisoned = threading.Event()  # set by SIGUSR1


def health_check(state):
    """What the CUDA health check says of a context with a sticky error."""
    if poisoned.is_set():
        raise nccl_resilient.RankNeedsNewProcess(
            "CUDA health check: the context is unusable: " + POISON)


def monotonic_ns():
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC)


def shard_data(shard):
    """The shard's samples and targets: the same for whichever process owns it."""
    g = torch.Generator().manual_seed(1000 + shard)
    x = torch.randn(SAMPLES_PER_SHARD, WEIGHTS, generator=g)
    truth = torch.linspace(-1.0, 1.0, WEIGHTS)
    y = x @ truth + 0.01 * torch.randn(SAMPLES_PER_SHARD, generator=g)
    return x, y


def load_checkpoint(path):
    if not os.path.exists(path):
        return 0, torch.zeros(WEIGHTS)
    saved = torch.load(path)
    return int(saved["step"]), saved["weights"]


def save_checkpoint(path, step, weights):
    tmp = f"{path}.tmp.{os.getpid()}"
    torch.save({"step": step, "weights": weights.clone()}, tmp)
    os.replace(tmp, path)


def stall(kind, seconds):
    """An injected stuck rank (--stall): alive, not coming to the next
    all_reduce: a pure-Python busy loop, or C code holding the GIL (libc's
    sleep through ctypes.PyDLL, which keeps the GIL)."""
    print(f"stall begin kind={kind} seconds={seconds} wall_ns={time.time_ns()} "
          f"mono_ns={monotonic_ns()}", flush=True)
    if kind == "busy":
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            pass
    else:
        import ctypes
        ctypes.PyDLL(None).sleep(int(seconds))
    print(f"stall end mono_ns={monotonic_ns()}", flush=True)


def parse_stall(text):
    """RANK@STEP:busy|gil:SECONDS"""
    try:
        who, kind, seconds = text.split(":")
        rank, step = who.split("@")
        if kind not in ("busy", "gil"):
            raise ValueError(kind)
        return int(rank), int(step), kind, float(seconds)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--stall wants RANK@STEP:busy|gil:SECONDS, not {text!r}")


def resources():
    return {"descriptors": len(os.listdir("/proc/self/fd")) - 1,
            "threads": len(os.listdir("/proc/self/task"))}


class Trainer:
    def __init__(self, args):
        self.args = args
        self.events = []
        self.device = torch.device("cpu")

    def record(self, iteration, event, step):
        self.events.append({"iteration": iteration, "event": event, "step": step,
                            "mono_ns": monotonic_ns()})

    def __call__(self, ctx: nccl_resilient.CallContext):
        args = self.args
        s = ctx.state
        if s.active_world_size != args.shards:
            raise nccl_resilient.RestartAbort(
                f"the job needs {args.shards} active ranks, not {s.active_world_size}")
        if args.backend == "nccl":
            # LOCAL_RANK's GPU; several ranks share one where there are fewer.
            local = int(os.environ.get("LOCAL_RANK", "0"))
            self.device = torch.device("cuda", local % torch.cuda.device_count())
            torch.cuda.set_device(self.device)
        rdist.init_process_group(ctx, args.backend,
                                 timeout=datetime.timedelta(seconds=args.pg_timeout))
        checkpoint = os.path.join(args.run_dir, "checkpoint.pt")
        start, w = load_checkpoint(checkpoint)
        w = w.to(self.device)
        self.record(s.iteration, "entered", start)
        print(f"enter iteration={s.iteration} rank={s.initial_rank} "
              f"active={s.active_rank}/{s.active_world_size} checkpoint_step={start} "
              f"mono_ns={monotonic_ns()}", flush=True)
        x, y = shard_data(s.active_rank)
        x, y = x.to(self.device), y.to(self.device)
        total = SAMPLES_PER_SHARD * args.shards
        for step in range(start, args.steps):
            time.sleep(args.step_ms / 1000.0)  # the simulated compute of a step
            if args.stall and s.iteration == 0 and s.initial_rank == args.stall[0] \
                    and step == args.stall[1]:
                stall(args.stall[2], args.stall[3])
            if poisoned.is_set():
                raise RuntimeError(POISON)  # what the step's first kernel reports
            err = x @ w - y
            # [sum of gradients..., sum of squared errors], summed in int64
            # fixed point: the same bits whatever order the backend adds in
            # (NCCL's ring order may change when the ranks are re-formed).
            local = torch.cat([x.t() @ err, (err * err).sum().reshape(1)])
            fixed = torch.round(local.double() * FIXED_ONE).long()
            rdist.wait(dist.all_reduce(fixed, async_op=True), op="all_reduce")
            sums = (fixed.double() / FIXED_ONE).float()
            w = w - LEARNING_RATE * (2.0 / total) * sums[:WEIGHTS]
            loss = float(sums[WEIGHTS]) / total
            ctx.ping()
            done = step + 1
            if step == start:
                self.record(s.iteration, "first step", done)
            print(f"step iteration={s.iteration} rank={s.initial_rank} active={s.active_rank} "
                  f"step={done} loss={loss:.9g} mono_ns={monotonic_ns()}", flush=True)
            if done % args.checkpoint_every == 0 and s.active_rank == 0:
                with ctx.atomic():
                    save_checkpoint(checkpoint, done, w.cpu())
                print(f"checkpoint iteration={s.iteration} step={done}", flush=True)
        self.record(s.iteration, "returned", args.steps)
        return w.cpu()


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir", required=True)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--checkpoint-every", type=int, default=20)
    p.add_argument("--step-ms", type=int, default=20)
    p.add_argument("--shards", type=int, default=6, help="active ranks (the data's shards)")
    p.add_argument("--backend", default="gloo", choices=["gloo", "nccl"])
    p.add_argument("--monitor", default=None,
                   help="the resilient-monitor executable (default: beside the library)")
    p.add_argument("--stall", type=parse_stall, default=None,
                   help="RANK@STEP:busy|gil:SECONDS: in iteration 0, initial rank RANK stalls "
                        "before the all_reduce of step STEP (a stuck rank, for benchmarks)")
    p.add_argument("--library-intervals", action="store_true",
                   help="the library's default intervals (1 s) instead of the demo's 100 ms")
    p.add_argument("--pg-timeout", type=float, default=150.0,
                   help="the process group's own timeout, s (above the hard timeout)")
    return p.parse_args()


def main():
    args = parse_args()
    initial_rank = int(os.environ.get("RANK", "0"))  # the loop rewrites RANK per iteration
    report = {"rank": initial_rank, "pid": os.getpid(), "outcome": "error", "message": "",
              "final_state": "", "timeline": [], "events": [],
              "resources": {"before": resources()}}
    code = 1
    signal.signal(signal.SIGUSR1, lambda _sig, _frame: poisoned.set())
    trainer = Trainer(args)
    wrapper = None
    try:
        run_dir = args.run_dir
        # The library's default timeouts (soft 60 s, hard 90 s, barriers
        # 120 s...): a dead rank is found by its monitor's pidfd, a frozen
        # one by its monitor's liveness link (NCCL_RESILIENT_LIVENESS_TIMEOUT_MS,
        # 1 s), neither by a timeout. Only the intervals are demo-sized
        # (docs/demo.md) unless --library-intervals.
        intervals = {} if args.library_intervals else dict(
            monitor_thread_interval=0.1, monitor_process_interval=0.1,
            progress_watchdog_interval=0.1)
        wrapper = nccl_resilient.Wrapper(
            rank_assignment=[nccl_resilient.MaxActiveWorldSize(args.shards),
                             nccl_resilient.ActivateAllRanks(), nccl_resilient.ShiftRanks()],
            min_active_world_size=args.shards, min_world_size=args.shards,
            abort=rdist.AbortTorchDistributed(), health_check=health_check,
            monitor_executable=args.monitor,
            monitor_log_file=os.path.join(run_dir, "monitor-{rank}.log"),
            monitor_pid_file=os.path.join(run_dir, "monitor-{rank}.pid"),
            termination_grace_time=1, **intervals)
        weights = wrapper.run(trainer)
        report["outcome"] = "completed"
        code = 0
        if weights is not None and wrapper.state.active_rank == 0:
            tmp = os.path.join(run_dir, f"weights.bin.tmp.{os.getpid()}")
            with open(tmp, "wb") as f:
                f.write(weights.numpy().astype("<f4").tobytes())
            os.replace(tmp, os.path.join(run_dir, "weights.bin"))
    except nccl_resilient.RankDiscarded as e:
        report.update(outcome="discarded", message=str(e))
        code = 3
    except nccl_resilient.RestartAbort as e:
        report.update(outcome="aborted", message=str(e))
        code = 4
    except Exception as e:
        report.update(outcome="error", message=f"{type(e).__name__}: {e}")
    if wrapper is not None:
        report["final_state"] = wrapper.state.describe()
        report["timeline"] = wrapper.timeline()
    report["events"] = trainer.events
    report["resources"]["after"] = resources()
    print(f"outcome rank={initial_rank} {report['outcome']}"
          + (f": {report['message']}" if report["message"] else ""), flush=True)
    # Under resilient-run a replacement has its predecessor's RANK: the
    # agent's process number (0 for the first) tells their reports apart.
    process = os.environ.get("RESILIENT_RUN_PROCESS", "0")
    path = os.path.join(args.run_dir, f"rank-{initial_rank}"
                        + (f".{process}" if process != "0" else "") + ".json")
    with open(path + ".tmp", "w") as f:
        json.dump(report, f, indent=1)
    os.replace(path + ".tmp", path)
    sys.stdout.flush()
    # Process groups of aborted iterations may still hold threads blocked on
    # a dead peer (gloo has no abort before torch 2.6): do not wait for them.
    os._exit(code) if threading.active_count() > 1 and code != 0 else None
    return code


if __name__ == "__main__":
    sys.exit(main())
