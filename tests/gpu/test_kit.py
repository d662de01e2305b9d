"""The GPU validation kit's own logic, checked without a GPU (suite unit):
what makes a step pass or fail must itself be right before a rare GPU hour
depends on it. Standard library only (unittest)."""

import ctypes
import json
import os
import signal
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bandwidth  # noqa: E402
import collectives  # noqa: E402
import faults  # noqa: E402
import kit  # noqa: E402
import nccl_log  # noqa: E402
import validate  # noqa: E402

GOOD_LOG = """\
host:1:1 [0] NCCL INFO NET/Plugin: Loaded net plugin Resilient (v11)
host:1:1 [0] NCCL INFO Using network Resilient
host:1:1 [0] NCCL INFO ncclCommInitRankConfig comm 0x5 rank 0 nranks 2 cudaDev 0 nvmlDev 0 busId 1000 commId 0xab12cd34ef567890 - Init COMPLETE
host:1:2 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/Resilient/0
host:1:2 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/Resilient/0
host:1:2 [0] NCCL INFO Channel 01/0 : 0[0] -> 1[0] [send] via NET/Resilient/0/GDRDMA
"""


class NcclLogTest(unittest.TestCase):
    def test_a_log_through_our_plugin_passes(self):
        self.assertEqual(nccl_log.plugin_problems(GOOD_LOG, "Resilient"), [])
        self.assertEqual(nccl_log.comm_ids(GOOD_LOG), {0xab12cd34ef567890})

    def test_another_network_fails(self):
        text = GOOD_LOG.replace("Using network Resilient", "Using network Socket")
        self.assertTrue(any("Socket" in p for p in nccl_log.plugin_problems(text, "Resilient")))

    def test_a_connection_through_p2p_fails(self):
        text = GOOD_LOG + "host:1:2 [0] NCCL INFO Channel 02/0 : 0[0] -> 1[0] [send] via P2P/CUMEM\n"
        problems = nccl_log.plugin_problems(text, "Resilient")
        self.assertTrue(any("P2P/CUMEM" in p for p in problems), problems)

    def test_a_log_without_info_lines_fails(self):
        self.assertEqual(len(nccl_log.plugin_problems("", "Resilient")), 2)

    def test_the_plain_plugin_is_not_ours(self):
        self.assertNotEqual(nccl_log.plugin_problems(GOOD_LOG, "ResilientTcpPlain"), [])


class LddTest(unittest.TestCase):
    SAMPLE = """\
\tlinux-vdso.so.1 (0x00007ffc)
\tlibresilient-restart.so.0 => /k/build/restart/libresilient-restart.so.0 (0x00007f)
\tlibcurl.so.4 => /lib/x86_64-linux-gnu/libcurl.so.4 (0x00007f)
\tlibfoo.so.1 => not found
\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)
\t/lib64/ld-linux-x86-64.so.2 (0x00007f)
"""

    def test_parse(self):
        got = dict(kit.parse_ldd(self.SAMPLE))
        self.assertIsNone(got["libfoo.so.1"])
        self.assertEqual(got["libc.so.6"], "/lib/x86_64-linux-gnu/libc.so.6")
        self.assertIn("ld-linux-x86-64.so.2", got)

    def test_allowed(self):
        allowed = {n for n, _ in kit.parse_ldd(self.SAMPLE) if kit.ALLOWED_LIBRARIES.match(n)}
        self.assertEqual(allowed, {"linux-vdso.so.1", "libresilient-restart.so.0", "libc.so.6",
                                   "ld-linux-x86-64.so.2"})

    def test_an_incomplete_kit_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            with self.assertRaisesRegex(kit.KitError, "build_kit.sh"):
                kit.Kit(d)
            with open(os.path.join(d, "manifest.json"), "w") as f:
                json.dump({"files": {"net_plugin": "x.so"}}, f)
            with self.assertRaisesRegex(kit.KitError, "lacks the roles"):
                kit.Kit(d)


def result(rank, *, error_at=10.2, code="ncclRemoteError", warn="peer 127.0.0.1:1 (host h, pid 4242)",
           abort_s=0.01, blackbox=None):
    r = {"rank": rank, "pid": 100 + rank, "pids": [4240, 4241, 4242, 4243], "iterations": 50,
         "error_mono": error_at, "error_code": code if error_at is not None else None,
         "last_error": warn, "abort_s": abort_s, "last_ok_mono": 9.9, "stall_limit": 10}
    if blackbox is not None:
        r["blackbox_faults"] = blackbox
    return r


class FaultJudgementTest(unittest.TestCase):
    pids = {0: 4240, 1: 4241, 2: 4242, 3: 4243}

    def test_every_survivor_on_time_passes(self):
        rows, problems, bound = faults.judge("sigkill", {r: result(r) for r in (0, 1, 3)}, self.pids, 10.0)
        self.assertEqual(problems, [])
        self.assertEqual([r["rank"] for r in rows], [0, 1, 3])
        self.assertEqual(bound, faults.SURFACE_ALLOWANCE_S)
        self.assertTrue(all(r["names_culprit"] for r in rows))

    def test_a_late_survivor_fails(self):
        res = {r: result(r) for r in (0, 1, 3)}
        res[0] = result(0, error_at=10.0 + 300)
        _, problems, _ = faults.judge("sigkill", res, self.pids, 10.0)
        self.assertTrue(any(p.startswith("rank 0: error after") for p in problems), problems)

    def test_the_sigstop_bound_is_the_liveness_timeout(self):
        res = {r: result(r, error_at=10.0 + 2.0) for r in (0, 1, 3)}
        _, problems, bound = faults.judge("sigstop", res, self.pids, 10.0)
        self.assertEqual(problems, [])
        self.assertAlmostEqual(bound, faults.LIVENESS_TIMEOUT_MS / 1000 + faults.SURFACE_ALLOWANCE_S)

    def test_a_warn_naming_another_pid_fails(self):
        res = {r: result(r, warn="peer (host h, pid 4241)") for r in (0, 1, 3)}
        _, problems, _ = faults.judge("sigkill", res, self.pids, 10.0)
        self.assertEqual(len([p for p in problems if "does not name pid 4242" in p]), 3)

    def test_a_hung_survivor_whose_blackbox_saw_the_fault_is_reported_loudly(self):
        res = {r: result(r) for r in (0, 1, 3)}
        res[3] = result(3, error_at=None, blackbox=["peer process exited"])
        _, problems, _ = faults.judge("sigkill", res, self.pids, 10.0)
        self.assertTrue(any("NCCL DID NOT PROPAGATE" in p for p in problems), problems)

    def test_a_slow_abort_fails(self):
        res = {r: result(r) for r in (0, 1, 3)}
        res[1] = result(1, abort_s=2.5)
        _, problems, _ = faults.judge("sigkill", res, self.pids, 10.0)
        self.assertTrue(any("ncclCommAbort took" in p for p in problems), problems)

    def test_an_injected_fault_keeps_the_culprit_among_the_rows(self):
        res = {r: result(r, warn="pid 4241") for r in range(4)}
        rows, problems, _ = faults.judge("error", res, self.pids, 10.0)
        self.assertEqual(problems, [])
        self.assertEqual(len(rows), 4)
        self.assertNotIn("names_culprit", rows[1])

    def test_the_cases(self):
        self.assertEqual(faults.CASES["sigkill"][1], signal.SIGKILL)
        self.assertIn("kind=stall", faults.CASES["stall"][2])


class ProfilerCheckTest(unittest.TestCase):
    def table(self, **c):
        comm = {"comm_id": 7, "coll_enqueued": 30, "coll_completed": 30, "in_flight": 0}
        comm.update(c)
        return {"rank": 0, "inspect": {"json": {"communicators": [comm]}}}

    def test_complete(self):
        self.assertEqual(collectives.profiler_problems(self.table(), {7}), [])

    def test_a_missing_communicator(self):
        self.assertIn("not in the profiler's table", collectives.profiler_problems(self.table(), {7, 8})[0])

    def test_an_incomplete_collective(self):
        self.assertIn("29 of 30", collectives.profiler_problems(self.table(coll_completed=29, in_flight=1), {7})[0])

    def test_no_inspect_output(self):
        r = {"rank": 1, "inspect": {"exit": 1, "stderr": "no blackbox for pid 9"}}
        self.assertIn("no blackbox", collectives.profiler_problems(r, {7})[0])


class BandwidthTest(unittest.TestCase):
    def test_bus_bandwidth_of_two_ranks_is_the_algorithm_bandwidth(self):
        self.assertAlmostEqual(bandwidth.bus_bandwidth(10**9, 1.0, 2), 1.0)
        self.assertAlmostEqual(bandwidth.bus_bandwidth(10**9, 1.0, 4), 1.5)

    def test_table(self):
        rows = [{"busbw_gbs": 1.0 + i} for i in range(len(bandwidth.SIZES_MIB))]
        t = bandwidth.table({"NCCL Socket": rows, "resilient(TCP)": rows})
        self.assertIn("| 256 MiB | 5.00 | 5.00 |", t)
        self.assertNotIn("plain", t)


def installed_nccl():
    import ctypes.util
    for name in ("libnccl.so.2", ctypes.util.find_library("nccl")):
        if name:
            try:
                import ctypes
                ctypes.CDLL(name)
                return name
            except OSError:
                pass
    return None


@unittest.skipIf(installed_nccl() is None, "no libnccl.so.2 on this machine")
class NcclBindingTest(unittest.TestCase):
    """The calls that need no GPU (ncclGetVersion, ncclGetUniqueId: no CUDA,
    no plugin), against the NCCL installed here."""

    def setUp(self):
        import nccl_ctypes
        self.nccl = nccl_ctypes.Nccl(installed_nccl())

    def test_version(self):
        code, text = self.nccl.version()
        self.assertGreaterEqual(code, 21400)
        self.assertRegex(text, r"^2\.\d+\.\d+$")

    def test_the_unique_id_keeps_all_128_bytes(self):
        uid = self.nccl.unique_id()
        self.assertEqual(len(uid), 256)
        self.assertNotEqual(self.nccl.unique_id(), uid)
        with self.assertRaises(ValueError):
            self.nccl.init_rank(2, uid[:18], 0)

    def test_errors_are_read(self):
        import nccl_ctypes
        self.assertEqual(nccl_ctypes.RESULT_NAMES[self.nccl.async_error(None)], "ncclInvalidArgument")
        self.assertIn("NULL", self.nccl.last_error(None))


class ValidateTest(unittest.TestCase):
    def test_the_plan_fits(self):
        self.assertLessEqual(validate.plan_seconds(), validate.PLAN_LIMIT_S)
        self.assertEqual(len({s.name for s in validate.PLAN}), len(validate.PLAN))

    def test_steps_on_request_stay_out_of_the_default_plan(self):
        timing = [s for s in validate.PLAN if s.name == "recovery-timing"]
        self.assertEqual(len(timing), 1)
        self.assertTrue(timing[0].on_request)
        self.assertEqual(validate.plan_seconds(),
                         sum(s.budget_s for s in validate.PLAN if s.name != "recovery-timing"))
        a = validate.parse_args(["--out", "x", "--only", "environment,recovery-timing"])
        self.assertEqual(a.only, ["environment", "recovery-timing"])

    def test_the_recovery_config_is_ncclconfig_of_2_28(self):
        import recovery
        self.assertEqual(ctypes.sizeof(recovery.Config), 80)
        self.assertEqual(recovery.Config.blocking.offset, 16)
        self.assertEqual(recovery.Config.netName.offset, 32)
        self.assertEqual(recovery.Config.trafficClass.offset, 44)
        self.assertEqual(recovery.Config.commName.offset, 48)
        self.assertEqual(recovery.Config.nvlinkCentricSched.offset, 76)
        c = recovery.non_blocking_config()
        self.assertEqual((c.size, c.magic, c.blocking), (80, 0xCAFEBEEF, 0))

    def test_unknown_steps_are_refused(self):
        with self.assertRaises(SystemExit):
            validate.parse_args(["--out", "x", "--only", "nosuch"])
        with self.assertRaises(SystemExit):
            validate.parse_args([])

    def test_profiler_verdict_comes_from_the_correctness_steps(self):
        ok = {"status": "pass", "details": {"profiler_problems": [], "communicators": [{}]}}
        self.assertEqual(validate.derive_profiler({"collectives-2": ok})["status"], "pass")
        bad = {"status": "pass", "details": {"profiler_problems": ["rank 0: x"], "communicators": [{}]}}
        self.assertEqual(validate.derive_profiler({"collectives-2": ok, "collectives-4": bad})["status"], "fail")
        self.assertEqual(validate.derive_profiler({})["status"], "not run")

    def test_report(self):
        report = {"kit": {"commit": "abc"}, "started": "now", "seconds": 1.0, "environment": {"device": "H100"},
                  "steps": [{"name": "fault-sigkill", "status": "pass", "seconds": 3, "budget_s": 30, "problems": [],
                             "details": {"case": "sigkill", "bound_ms": 1000,
                                         "rows": [{"rank": 1, "error": "ncclRemoteError", "detect_ms": 2.0,
                                                   "abort_ms": 5.0, "names_culprit": True}]}}]}
        with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as logs:
            with open(os.path.join(logs, "a.log"), "w") as f:
                f.write("x")
            validate.write_report(out, report, logs)
            self.assertEqual(sorted(os.listdir(out)), ["logs.tar.gz", "report.json", "report.md"])
            with open(os.path.join(out, "report.md")) as f:
                md = f.read()
        self.assertIn("| sigkill | 1 | ncclRemoteError | 2.0 | 1000 | 5.0 | True |", md)
        self.assertIn("- device: H100", md)


if __name__ == "__main__":
    unittest.main()
