"""Whole jobs of inprocess_main.py: scripts written against the reference
restarter's documented API, run by ``nccl_resilient.inprocess``, each
fault of the reference's documented scenarios ending as the reference
documents it (seeds/002 usage guide, seeds/004 rank assignment,
restart-model.md §1.1-1.3). The Wrapper's store is served by rank 0 at
MASTER_PORT, the reference's default."""

import os
import re
import signal

import pytest

from inprocess_jobs import run_ranks


@pytest.fixture
def job(base_env, tmp_path):
    def run(scenario, world_size, timeout=60):
        out = tmp_path / scenario
        out.mkdir()
        return run_ranks(dict(base_env, SCENARIO=scenario), out, "inprocess_main.py", world_size,
                         timeout)
    return run


def completed(job, ranks):
    for r in ranks:
        assert job.outcome(r) == "completed", (r, job.results.get(r), job.out_dir)


def iterations(job, rank):
    return [c["iteration"] for c in job.results[rank]["calls"]]


def test_an_exception_restarts_every_rank(job):
    j = job("exception", 3)
    completed(j, range(3))
    for r in range(3):
        res = j.results[r]
        assert iterations(j, r) == [0, 1]
        assert res["returned"] == 41  # train(4): 4 * 10 + iteration
        # State.fn_exception: the exception of this rank's previous call.
        assert res["calls"][1]["fn_exception"] == ("ValueError" if r == 1 else None)
        # Hooks in the documented order: initialize, (fault) abort, finalize,
        # initialize, completion; terminate never.
        assert res["hooks"] == [["initialize", 0], ["abort", 0], ["finalize", 0],
                                ["initialize", 1], ["completion", 1]], res["hooks"]
    # A pure-Python loop is ended by the asynchronous exception.
    assert j.results[2]["calls"][0]["interrupted_after_s"] < 5
    # Rank 0 was in CallWrapper.atomic() when rank 1 raised: the section ran
    # to its end (the file is whole) and only then was the rank interrupted.
    assert "atomic_done" in j.results[0]["calls"][0]
    assert "spun_out" not in j.results[0]["calls"][0]
    with open(j.out_dir / "atomic-0") as f:
        assert f.read() == "whole"
    # monitor_process_logfile / _pidfile with {rank}: the pid file (removed
    # when the monitor ends) named the monitor process while the rank ran.
    for r in range(3):
        assert f"rank {r}: watching rank {r}" in (j.out_dir / "monitor" / f"monitor-{r}.log"
                                                  ).read_text()
        assert j.results[r]["calls"][1]["monitor_pid"] > 0


def test_sigkill_the_survivors_shift_and_go_on(job):
    j = job("sigkill", 4)
    assert j.returncodes[2] == -signal.SIGKILL
    completed(j, (0, 1, 3))
    # ShiftRanks: initial rank 3 is rank 2 of 3; RANK and WORLD_SIZE say so.
    last = j.results[3]["calls"][-1]
    assert (last["iteration"], last["rank"], last["world_size"]) == (1, 2, 3)
    assert last["env"] == ["2", "3"] and j.results[3]["returned"] == "2"


def test_soft_timeout_restarts_cooperatively_and_the_heartbeats_count(job):
    j = job("soft_timeout", 3)
    completed(j, range(3))
    # Timed from the silent rank's last sign of life, not from each rank's own
    # start: under load the ranks enter an iteration up to tenths of a second
    # apart (a loaded run had rank 2 interrupted 1.28 s into its own wait).
    silent_since = j.results[1]["calls"][0]["entered_at"]
    pinged_at = j.results[0]["calls"][1]["pinged_at"]
    for r in range(3):
        assert iterations(j, r) == [0, 1, 2], j.results[r]
        first, second = j.results[r]["calls"][:2]
        # Iteration 0: rank 1 ran no Python code (GIL released) for the soft
        # timeout (1.5 s): every rank restarted, rank 1 too, released by its
        # Abort.
        key = "released_at" if r == 1 else "interrupted_at"
        assert 1.4 < first[key] - silent_since < 8, first
        # Iteration 1: 2.5 s of Python without a ping is progress (automatic
        # heartbeat) ...
        assert second.get("spun_out"), second
        # ... until rank 0 pinged once and stopped: then the soft timeout.
        assert 1.4 < second["interrupted_at"] - pinged_at < 8, second
    # Iteration 2: rank 2's 2.5 s sleep with hang protection disabled
    # restarted nothing.
    assert j.results[2]["returned"] == 2


def test_hard_timeout_ends_a_rank_holding_the_gil(job):
    j = job("hard_timeout", 3)
    # SIGTERM after the hard timeout (SIGKILL after the grace time if needed).
    assert j.returncodes[1] in (-signal.SIGTERM, -signal.SIGKILL)
    assert 1 not in j.results
    completed(j, (0, 2))
    silent_at = float((j.out_dir / "silent-at-1").read_text())
    for r in (0, 2):
        first = j.results[r]["calls"][0]
        # The soft timeout restarted them, counted from rank 1's silence.
        assert 1.4 < first["interrupted_at"] - silent_at < 8
        assert j.results[r]["calls"][-1]["world_size"] == 2
    assert "hard timeout" in j.log(1)


def test_failing_health_checks_end_their_ranks(job):
    j = job("health_check", 4)
    # The Wrapper re-raises the health check's exception on its rank.
    assert j.outcome(1) == "FaultCounterExceeded"
    assert j.outcome(2) == "Unfit" and j.results[2]["message"] == "rank 2 is unfit"
    for r in (1, 2):
        assert j.results[r]["hooks"] == [["terminate", 0]]
    completed(j, (0, 3))
    assert j.results[3]["returned"] == 2 and j.results[3]["calls"][-1]["rank"] == 1


def test_tree_reserve_rank_replaces_a_dead_one_in_its_layer(job):
    j = job("tree_reserve", 4)
    assert j.returncodes[2] == -signal.SIGKILL
    completed(j, (0, 1, 3))
    # Iteration 0: one active rank per host, initial ranks 0 and 2.
    assert j.results[0]["calls"][0]["active_world_size"] == 2
    assert j.results[1]["calls"] == [] and j.results[1]["returned"] is None
    # Initial rank 3, the reserve of the dead rank's host, took its active rank.
    assert [(c["iteration"], c["active_rank"]) for c in j.results[3]["calls"]] == [(1, 1)]
    assert j.results[3]["calls"][0]["env"] == ["1", "2"]
    assert j.results[0]["returned"] == 0


def test_filter_count_grouped_by_key_discards_the_broken_pair(job):
    j = job("filter_count", 4)
    assert j.returncodes[3] == -signal.SIGKILL
    assert j.outcome(2) == "RankDiscarded"
    completed(j, (0, 1))
    for r in (0, 1):
        assert j.results[r]["returned"] == 2
        assert j.results[r]["calls"][-1]["rank"] == r


def test_nested_restarter_hooks_log_their_states(job):
    j = job("nested", 4)
    assert j.outcome(2) == "SystemExit" and j.results[2]["message"] == "3"
    completed(j, (0, 1, 3))
    lines = {r: re.findall(r"\[NestedRestarter\] name=\[InProcess\] state=(\w+) stage=(\w+)",
                           j.log(r)) for r in range(4)}
    handled = [("handling", "starting"), ("handling", "completed")]
    for r in (0, 1, 3):
        assert lines[r] == handled * 2 + [("finalized", "completed")], lines[r]
        assert iterations(j, r) == [0, 1, 2]
    assert lines[2] == handled + [("handling", "starting"), ("aborted", "completed")], lines[2]


def test_retry_controller_ends_the_job(job):
    j = job("retry_limit", 2)
    for r in range(2):
        # RestartAbort, a BaseException, on every rank, at iteration 2.
        assert j.outcome(r) == "RestartAbort", j.results[r]
        assert "maxIterations 2" in j.results[r]["message"]
        assert iterations(j, r) == [0, 1]
    assert j.results[0]["hooks"] == [["terminate", 2]]


def test_a_base_exception_ends_only_its_rank(job):
    j = job("base_exception", 3)
    assert j.outcome(1) == "RestartAbort" and j.results[1]["message"] == "rank 1 gives up"
    assert j.results[1]["hooks"] == [["terminate", 0]]
    completed(j, (0, 2))
    assert j.results[2]["returned"] == 2


def test_threaded_finalize_timeout_ends_its_rank(job):
    j = job("finalize", 3)
    assert j.outcome(1) == "TimeoutError", j.results.get(1)
    completed(j, (0, 2))
    for r in (0, 2):
        assert j.results[r]["hooks"] == [["finalize", 0]]
        assert j.results[r]["returned"] == 2


def test_a_rank_filter_of_ones_own_and_the_deprecated_rank_filter(job):
    j = job("custom_assignment", 4)
    assert j.returncodes[1] == -signal.SIGKILL
    completed(j, (0, 2, 3))
    assert "deprecated" in j.results[0]["deprecation"][0]
    # Iteration 0: the highest rank (3) waits; 0..2 compute (MaxActiveWorldSize(3) too).
    assert j.results[3]["calls"] == [] and j.results[3]["returned"] is None
    assert j.results[0]["calls"][0]["active_world_size"] == 3
    # Iteration 1: 0 and 2 (now rank 1) compute, 3 (now rank 2) still waits.
    assert [c["active_rank"] for c in j.results[2]["calls"]] == [2, 1]
    assert j.results[0]["calls"][1]["active_world_size"] == 2
