"""The restart loop from Python: whole jobs of rank_main.py processes with a
resilient-store (conftest.py), one fault per test."""

import signal

import pytest


def completed(job, ranks):
    for r in ranks:
        assert job.outcome(r) == "completed", job.explain(r)


def test_exception_restarts_every_rank_and_interrupts_busy_python(run_job):
    job = run_job("exception", 3)
    completed(job, range(3))
    for r in range(3):
        calls = job.results[r]["calls"]
        assert [c["iteration"] for c in calls] == [0, 1]
        assert job.results[r]["returned"] == 1
        # What raised is in the next call's State.fn_exception, on its rank only.
        assert calls[1]["fn_exception"] == ("ValueError" if r == 1 else None)
    for r in (0, 2):
        # The pure-Python loop (no library call) was interrupted by the
        # asynchronous RankShouldRestart, well before its 30 s.
        first = job.results[r]["calls"][0]
        assert "busy_timed_out" not in first
        assert first["interrupted_after_s"] < 10


def test_sigkill_brings_in_the_spare(run_job):
    job = run_job("sigkill", 4)
    assert job.returncodes[2] == -signal.SIGKILL
    completed(job, (0, 1, 3))
    spare = job.results[3]["calls"]
    # The spare did not run the function in iteration 0; in iteration 1 it is
    # active rank 2 of 3.
    assert [c["iteration"] for c in spare] == [1]
    assert spare[0]["active_rank"] == 2 and spare[0]["active_world_size"] == 3
    assert spare[0]["env_rank"] == "2" and spare[0]["env_world"] == "3"


def test_sigstop_is_found_by_the_liveness_link_and_the_rank_is_replaced(run_job):
    job = run_job("sigstop", 3)
    # Killed by its monitor at the liveness timeout (SIGKILL), not after the
    # soft timeout at the hard one (SIGCONT, then SIGTERM).
    assert job.returncodes[1] == -signal.SIGKILL
    completed(job, (0, 2))
    for r in (0, 2):
        last = job.results[r]["calls"][-1]
        assert last["iteration"] == 1 and last["active_world_size"] == 2


def test_failed_health_check_terminates_the_rank(run_job):
    job = run_job("health_check_fault", 4)
    assert job.outcome(1) == "unhealthy"
    assert "HealthCheckError: injected: rank 1 is unfit" in job.results[1]["message"]
    completed(job, (0, 2, 3))
    assert any(c["active_world_size"] == 3 for c in job.results[3]["calls"])


def test_a_health_check_can_ask_for_a_new_process(run_job):
    # Python had no way to say "only a new process can use this GPU again":
    # such a health check's rank left as merely unhealthy (HealthCheckError),
    # and resilient-run saw an error exit, not 75.
    job = run_job("needs_new_process", 4)
    assert job.outcome(1) == "needs_new_process", job.explain(1)
    assert "injected: rank 1's CUDA context is poisoned" in job.results[1]["message"]
    completed(job, (0, 2, 3))
    # Under resilient-run the process leaves with exit 75 for the agent.
    job = run_job("needs_new_process", 4, env={"NCCL_RESILIENT_RESTART_EXIT_FOR_NEW_PROCESS": "1"})
    assert job.returncodes[1] == 75, job.explain(1)
    assert 1 not in job.results
    completed(job, (0, 2, 3))


def test_failing_abort_hook_does_not_stop_the_restart(run_job):
    job = run_job("abort_hook_fault", 3)
    completed(job, range(3))
    for r in (1, 2):
        assert job.results[r]["calls"][0]["interrupted_after_s"] < 10


def test_a_collective_the_abort_completes_is_never_used(run_job):
    # GPU kit, torch demo on NCCL: a step logged its loss from an all-reduce
    # that ncclCommAbort had cut short (the interruption came after the abort).
    job = run_job("abort_completes_the_collective", 3)
    completed(job, range(3))
    for r in (0, 2):
        first = job.results[r]["calls"][0]
        assert "used_a_result_of_the_abort" not in first, first


def test_restart_abort_from_initialize_ends_every_rank(run_job):
    job = run_job("initialize_abort", 3)
    for r in range(3):
        assert job.outcome(r) == "aborted", job.explain(r)
        assert "stop at iteration 1" in job.results[r]["message"]


@pytest.mark.parametrize("scenario", ["interrupt_before_initialize_returns",
                                      "interrupt_before_function_starts"])
def test_a_restart_begun_before_the_function_runs_skips_it(run_job, scenario):
    job = run_job(scenario, 3)
    completed(job, range(3))
    # Rank 1 reached its function only after its restart had begun: it never
    # ran iteration 0 (it was not left spinning there).
    assert [c["iteration"] for c in job.results[1]["calls"]] == [1], job.explain(1)


def test_retry_limit_ends_the_job(run_job):
    job = run_job("retry_limit", 2)
    for r in range(2):
        assert job.outcome(r) == "aborted", job.explain(r)
        assert max(c["iteration"] for c in job.results[r]["calls"]) == 2


def test_python_rank_assignment_policy(run_job):
    job = run_job("python_policy", 3)
    completed(job, range(3))
    # Initial rank 2 is the spare: it never ran the function.
    assert job.results[2]["calls"] == []
    assert [job.results[r]["returned"] for r in (0, 1)] == [0, 1]
