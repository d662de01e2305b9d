"""torch.distributed with the package (Debian's python3-torch, gloo): the
store adapter against what torch's own store tests expect of a Store, and a
process group through it across a restart."""

import datetime
import threading
import time

import pytest

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

import nccl_resilient as nr  # noqa: E402
from nccl_resilient import distributed as rdist  # noqa: E402


@pytest.fixture
def store():
    s = rdist.TorchStore(nr.Store("memory").view("torch-test"),
                         datetime.timedelta(seconds=5))
    assert isinstance(s, dist.Store)
    return s


def test_set_get_add(store):
    store.set("key0", "value0")
    store.set("key1", b"value1")
    assert store.get("key0") == b"value0"
    assert store.get("key1") == b"value1"
    assert store.add("counter", 5) == 5
    assert store.add("counter", 6) == 11
    assert store.add("counter", -11) == 0


def test_get_waits_for_the_key(store):
    threading.Timer(0.2, lambda: store.set("late", b"here")).start()
    start = time.monotonic()
    assert store.get("late") == b"here"
    assert time.monotonic() - start >= 0.15


def test_wait_and_timeout(store):
    store.set("a", b"1")
    store.wait(["a"])
    store.set_timeout(datetime.timedelta(seconds=0.3))
    start = time.monotonic()
    with pytest.raises(RuntimeError):  # torch's stores raise RuntimeError on a timeout
        store.wait(["never"])
    assert 0.25 <= time.monotonic() - start < 5
    with pytest.raises(RuntimeError):
        store.wait(["never"], datetime.timedelta(seconds=0.1))
    with pytest.raises(RuntimeError):
        store.get("never")


def test_compare_set(store):
    # As torch's TCPStore: absent key and empty expected: set; absent key and
    # another expected: return the expected; present: swap on a match, else
    # return the current value.
    assert store.compare_set("cs", "", "first") == b"first"
    assert store.compare_set("cs", "wrong", "second") == b"first"
    assert store.compare_set("cs", "first", "second") == b"second"
    assert store.compare_set("absent", "x", "y") == b"x"
    assert store.get("cs") == b"second"


def test_check_and_delete(store):
    store.set("c", b"1")
    assert store.check(["c"])
    assert not store.check(["c", "d"])
    assert store.delete_key("c")
    assert not store.check(["c"])


def test_process_group_through_the_store_across_a_restart(run_job):
    job = run_job("torch_restart", 2)
    for r in range(2):
        assert job.outcome(r) == "completed", job.explain(r)
        # 1 + 2 on every element, in iteration 1's group.
        assert job.results[r]["returned"] == [3.0] * 4
    first = job.results[0]["calls"][0]
    assert first["iteration"] == 0 and first["interrupted_after_s"] < 10


@pytest.mark.parametrize("how", ["busy", "gil"])
def test_a_rank_that_does_not_come_to_the_collective_is_named_stuck(run_job, how):
    # Issue 32: a rank alive but not entering the all_reduce its peers wait
    # in (a Python busy loop; C code holding the GIL) is named live by the
    # health comparison over the collectives nccl_resilient.distributed.wait
    # marks (gloo: no profiler); its monitor does not kill it as frozen; the
    # job completes. Before, nothing named it until the soft timeout.
    job = run_job(f"torch_stuck_{how}", 3,
                  env={"NCCL_RESILIENT_STUCK_RANK_TIMEOUT_MS": "1500"})
    for r in range(3):
        assert job.outcome(r) == "completed", job.explain(r)
    assert job.returncodes == [0, 0, 0]
    # Rank 1's own timeline has the report (it learnt it while stuck).
    assert [0, "health report"] in job.results[1]["phases"]
    # Active rank 0 compared and said so: rank, collective, function.
    log = (job.out_dir / "rank-0.log").read_text()
    line = next(l for l in log.splitlines() if "stuck rank rank 1" in l)
    assert "has not entered collective 4 (all_reduce)" in line
    assert "2 of its ranks have waited for" in line
    # Nobody else was named.
    for r in (0, 2):
        assert f"stuck rank rank {r} " not in log
