"""The acceptance test of nccl_resilient.inprocess: a training script
written against nvidia-resiliency-ext's documented API
(inprocess_train.py, whose only import of the restarter is
``import nccl_resilient.inprocess as inprocess``) runs on the CPU with gloo,
recovers from an exception, a SIGKILL and a SIGSTOP as the reference
documents (the rank that raised restarts with the others; a dead or frozen
rank is gone and a reserve takes its place), and ends with the weights of a
run without faults."""

import ast
import json
import signal

import pytest

from inprocess_jobs import run_ranks

SCRIPT = "inprocess_train.py"


def test_the_script_imports_the_restarter_only_from_nccl_resilient_inprocess():
    with open(SCRIPT) as f:
        tree = ast.parse(f.read())
    imports = [n for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = [a.name for n in imports if isinstance(n, ast.Import) for a in n.names]
    assert "nccl_resilient.inprocess" in names
    others = [n for n in imports if (isinstance(n, ast.ImportFrom) and n.module
                                     and "resilien" in n.module)
              or (isinstance(n, ast.Import)
                  and any("resilien" in a.name and a.name != "nccl_resilient.inprocess"
                          for a in n.names))]
    assert not others, "the script reaches nccl_resilient beyond its one import line"


@pytest.fixture(scope="module")
def fault_free(base_env, tmp_path_factory):
    out = tmp_path_factory.mktemp("fault_free")
    job = run_ranks(dict(base_env, TRAIN_STEPS="8", TRAIN_ACTIVE="3"), out, SCRIPT, 3, 60)
    for r in range(3):
        assert job.outcome(r) == "completed", (r, job.results.get(r), out)
        assert [c["iteration"] for c in job.results[r]["calls"]] == [0]
    return json.loads((out / "final.json").read_text())


def test_exception_sigkill_and_sigstop_end_as_without_faults(base_env, tmp_path, fault_free):
    # Five ranks, three active, two reserves. Step 2: initial rank 1 raises;
    # step 4: initial rank 2 is killed; step 6: initial rank 3 (the reserve
    # that took rank 2's place) is stopped.
    env = dict(base_env, TRAIN_STEPS="8", TRAIN_ACTIVE="3",
               TRAIN_FAULTS="exception:1@2,sigkill:2@4,sigstop:3@6")
    job = run_ranks(env, tmp_path, SCRIPT, 5, 90)
    assert job.returncodes[2] == -signal.SIGKILL
    # The frozen rank is gone: its monitor's liveness link kills it within a
    # second (the reference: the hard timeout's SIGTERM, then SIGKILL).
    assert job.returncodes[3] in (-signal.SIGKILL, -signal.SIGTERM)
    for r in (0, 1, 4):
        assert job.outcome(r) == "completed", (r, job.results.get(r), tmp_path)
        # Every survivor ends with the fault-free run's weights, exactly.
        assert job.results[r]["returned"] == fault_free
    assert json.loads((tmp_path / "final.json").read_text()) == fault_free
    # Rank 1 raised and was restarted with the others, each call resuming
    # from the last checkpoint before the fault (a loaded machine may add a
    # restart, never lose one). That is the faulting step's (2, 4, 6) or the
    # one before: the fault may interrupt rank 0 after the step's all-reduce
    # and before it saved the checkpoint (a CI-like run resumed at 1 after
    # the fault at 2, and still ended with the fault-free weights).
    calls = job.results[1]["calls"]
    assert calls[0]["fault"] == "exception", calls
    starts = [c["start"] for c in calls]
    assert starts == sorted(starts) and starts[0] == 0, calls
    for step in (2, 4, 6):
        assert {step - 1, step} & set(starts[1:]), (step, calls)
    assert [c["iteration"] for c in calls] == list(range(len(calls))), calls
    # The reserves: initial rank 3 came in after the SIGKILL as rank 2 ...
    assert (tmp_path / "fault-sigstop-3").exists()
    # ... and initial rank 4 after the SIGSTOP, as rank 2 of 3, from step 6.
    first = job.results[4]["calls"][0]
    assert (first["rank"], first["world"], first["start"]) == (2, 3, 6), job.results[4]
