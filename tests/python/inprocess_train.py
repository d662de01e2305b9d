"""A data-parallel training script written against nvidia-resiliency-ext's
documented ``inprocess`` API (the usage guide, seeds/002: a Wrapper around a
function that initializes torch.distributed itself, resumes from its
checkpoint on every call, saves it inside CallWrapper.atomic(), pings, keeps
spare ranks with MaxActiveWorldSize and ShiftRanks, a short gloo timeout as
the Known issues advise). Only its import of the restarter names
nccl_resilient.

Environment: RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (torchrun's), OUT_DIR;
TRAIN_STEPS, TRAIN_ACTIVE (active ranks), TRAIN_FAULTS: faults to inject
once each, "kind:initial_rank@step,..." with kind exception, sigkill or
sigstop. Writes OUT_DIR/rank-<RANK>.json (how it ended, its calls) and,
from active rank 0, OUT_DIR/final.json (the trained weights).
"""

import datetime
import json
import os
import signal
import sys
from typing import Optional

import torch
import torch.distributed as dist

import nccl_resilient.inprocess as inprocess

STEPS = int(os.environ.get("TRAIN_STEPS", "8"))
ACTIVE = int(os.environ.get("TRAIN_ACTIVE", "3"))
OUT = os.environ["OUT_DIR"]
CHECKPOINT = os.path.join(OUT, "checkpoint.pt")
INITIAL_RANK = int(os.environ["RANK"])
BATCH = 24  # the global batch, split among the active ranks
FEATURES = 8

calls = []


def faults():
    out = {}
    for item in filter(None, os.environ.get("TRAIN_FAULTS", "").split(",")):
        kind, where = item.split(":")
        rank, step = where.split("@")
        out[(int(rank), int(step))] = kind
    return out


def inject(step):
    """The fault planned for this rank at this step, the first time only."""
    kind = faults().get((INITIAL_RANK, step))
    if kind is None:
        return
    try:
        os.close(os.open(os.path.join(OUT, f"fault-{kind}-{INITIAL_RANK}"),
                         os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return
    calls[-1]["fault"] = kind
    if kind == "exception":
        raise RuntimeError(f"injected at step {step}")
    os.kill(os.getpid(), signal.SIGKILL if kind == "sigkill" else signal.SIGSTOP)


def data(step):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(BATCH, FEATURES, generator=g, dtype=torch.float64)
    y = x @ torch.arange(1.0, FEATURES + 1, dtype=torch.float64) + 0.1 * torch.randn(
        BATCH, generator=g, dtype=torch.float64)
    return x, y


def build():
    torch.manual_seed(0)
    model = torch.nn.Linear(FEATURES, 1).double()
    return model, torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)


# The store of torch's process groups: rank 0's TCPStore next to the
# Wrapper's (which serves MASTER_PORT), a prefix per restart iteration.
base_store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]) + 1,
                           int(os.environ["WORLD_SIZE"]), INITIAL_RANK == 0,
                           timeout=datetime.timedelta(seconds=60))


@inprocess.Wrapper(
    rank_assignment=inprocess.Compose(
        inprocess.rank_assignment.MaxActiveWorldSize(ACTIVE),
        inprocess.rank_assignment.ShiftRanks(),
    ),
    health_check=inprocess.health_check.CudaHealthCheck(),
    soft_timeout=datetime.timedelta(seconds=4),
    hard_timeout=datetime.timedelta(seconds=8),  # above gloo's timeout: a rank waits there
    heartbeat_timeout=datetime.timedelta(seconds=4),
    barrier_timeout=datetime.timedelta(seconds=30),
    completion_timeout=datetime.timedelta(seconds=30),
    monitor_thread_interval=datetime.timedelta(seconds=0.05),
    monitor_process_interval=datetime.timedelta(seconds=0.05),
    progress_watchdog_interval=datetime.timedelta(seconds=0.05),
    heartbeat_interval=datetime.timedelta(seconds=0.5),
    last_call_wait=datetime.timedelta(seconds=0.1),
    termination_grace_time=datetime.timedelta(seconds=0.5),
)
def train(call_wrapper: Optional[inprocess.CallWrapper] = None):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    store = dist.PrefixStore(f"iteration-{call_wrapper.iteration}", base_store)
    # A short gloo timeout: gloo collectives cannot be aborted (Known issues).
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=3))
    model, opt = build()
    start = 0
    if os.path.exists(CHECKPOINT):
        saved = torch.load(CHECKPOINT)
        model.load_state_dict(saved["model"])
        opt.load_state_dict(saved["opt"])
        start = saved["step"]
    calls.append({"iteration": call_wrapper.iteration, "rank": rank, "world": world,
                  "start": start})
    per = BATCH // world
    for step in range(start, STEPS):
        x, y = data(step)
        x, y = x[rank * per:(rank + 1) * per], y[rank * per:(rank + 1) * per]
        loss = ((model(x).squeeze(1) - y) ** 2).sum() / BATCH
        opt.zero_grad()
        loss.backward()
        inject(step)
        for p in model.parameters():
            dist.all_reduce(p.grad)
        opt.step()
        call_wrapper.ping()
        if rank == 0:
            with call_wrapper.atomic():
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(),
                            "step": step + 1}, CHECKPOINT + ".tmp")
                os.replace(CHECKPOINT + ".tmp", CHECKPOINT)
    weights = [p.detach().flatten().tolist() for p in model.parameters()]
    dist.destroy_process_group()
    if rank == 0:
        with open(os.path.join(OUT, "final.json"), "w") as f:
            json.dump(weights, f)
    return weights


def main():
    result = {"rank": INITIAL_RANK, "calls": calls}
    try:
        result["returned"] = train()
        result["outcome"] = "completed"
    except BaseException as e:
        result.update(outcome=type(e).__name__, message=str(e))
    with open(os.path.join(OUT, f"rank-{INITIAL_RANK}.json"), "w") as f:
        json.dump(result, f)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
