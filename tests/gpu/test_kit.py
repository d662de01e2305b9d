"""The GPU validation kit's own logic, checked without a GPU (suite unit):
what makes a step pass or fail must itself be right before a rare GPU hour
depends on it. Standard library only (unittest)."""

import ctypes
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from contextlib import redirect_stdout

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bandwidth  # noqa: E402
import collectives  # noqa: E402
import demo_nccl  # noqa: E402
import faults  # noqa: E402
import kit  # noqa: E402
import kit_fakes  # noqa: E402
import nccl_ctypes  # noqa: E402
import nccl_log  # noqa: E402
import nccl_probe  # noqa: E402
import recovery  # noqa: E402
import torch_watchdog  # noqa: E402
import validate  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

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


def coll(op_count, comm="0x5"):
    return (f"h:1:1 [0] NCCL INFO AllReduce: opCount {op_count:x} sendbuff 0x7f00 recvbuff 0x7f00 count 4 "
            f"datatype 5 op 0 root 0 comm {comm} [nranks=6] stream 0x99\n")


def init_done(comm, rank=0, nranks=6):
    return (f"h:1:1 [0] NCCL INFO ncclCommInitRankConfig comm {comm} rank {rank} nranks {nranks} cudaDev 0 "
            f"nvmlDev 0 busId 1000 commId 0xab - Init COMPLETE\n")


class LaunchCheckTest(unittest.TestCase):
    """demo-nccl's check that every communicator's collectives launched."""

    # A survivor: its first communicator ran, the one after the restart
    # too (calls after the first log a growing opCount).
    HEALTHY = (init_done("0x5") + coll(0) + coll(1) + coll(2)
               + init_done("0x6", 1, 7) + coll(0, "0x6") + coll(1, "0x6"))
    # Run 7's symptom: after the restart every call logs opCount 0.
    TRAPPED = (init_done("0x5") + coll(0) + coll(1)
               + "h:1:1 [0] NCCL INFO init.cc:2381 -> 6\n"
               + init_done("0x6", 1, 7) + coll(0, "0x6") + coll(0, "0x6") + coll(0, "0x6"))

    def test_verdicts(self):
        self.assertEqual(nccl_log.launch_verdict([]), "no calls")
        self.assertEqual(nccl_log.launch_verdict([("AllReduce", 0)]), "one call")
        self.assertEqual(nccl_log.launch_verdict([("AllReduce", 0), ("AllReduce", 0)]), "never launched")
        self.assertEqual(nccl_log.launch_verdict([("AllReduce", 0), ("AllReduce", 1)]), "launched")

    def test_communicators_follow_init_lines(self):
        comms = nccl_log.communicators(self.TRAPPED)
        self.assertEqual([(c["comm"], c["rank"], len(c["calls"])) for c in comms],
                         [("0x5", 0, 2), ("0x6", 1, 3)])
        # A pointer NCCL reuses for a later communicator starts a new entry.
        reused = init_done("0x5") + coll(0) + coll(1) + init_done("0x5", 2) + coll(0)
        self.assertEqual([len(c["calls"]) for c in nccl_log.communicators(reused)], [2, 1])

    def test_a_healthy_job_passes(self):
        problems, summary = nccl_log.launch_problems({"nccl-a.log": self.HEALTHY}, "2.28.9")
        self.assertEqual(problems, [])
        self.assertEqual((summary["communicators"], summary["launched"], summary["destroy_trap_lines"]), (2, 2, 0))
        self.assertEqual([c["verdict"] for c in summary["after_first"]], ["launched"])

    def test_the_trap_fails_twice(self):
        problems, summary = nccl_log.launch_problems({"nccl-b.log": self.TRAPPED}, "2.28.9")
        self.assertEqual(summary["never_launched"], 1)
        self.assertTrue(any("every one logged opCount 0" in p for p in problems), problems)
        self.assertTrue(any("init.cc:2381" in p for p in problems), problems)

    def test_the_destroy_line_depends_on_the_version(self):
        text = "h:1:1 [0] NCCL INFO init.cc:2381 -> 6\n"
        self.assertEqual(len(nccl_log.destroy_trap_lines(text, "2.28.9")), 1)
        self.assertEqual(nccl_log.destroy_trap_lines(text, "2.30.7"), [])
        self.assertEqual(len(nccl_log.destroy_trap_lines("x init.cc:2901 -> 6", "2.30.7")), 1)
        self.assertIsNone(nccl_log.destroy_trap_lines(text, "9.9.9"))

    def test_logs_without_collective_lines_fail(self):
        problems, _ = nccl_log.launch_problems({"nccl-c.log": init_done("0x5")}, "2.28.9")
        self.assertTrue(any("NCCL_DEBUG_SUBSYS=COLL" in p for p in problems), problems)
        self.assertTrue(nccl_log.launch_problems({}, "2.28.9")[0])

    def test_the_demo_step_judges_both(self):
        ok, problems, summary = demo_nccl.judge(0, ["PASS"], {"nccl-a.log": self.HEALTHY}, "2.28.9")
        self.assertTrue(ok, problems)
        self.assertIn("| nccl-a.log | 0x6 | 1/7 | 2 | 1 | launched |", demo_nccl.launch_table(summary))
        ok, problems, _ = demo_nccl.judge(1, ["FAIL (files kept in /tmp/x)"], {"nccl-a.log": self.HEALTHY}, "2.28.9")
        self.assertFalse(ok)
        self.assertIn("exited 1", problems[0])
        ok, _, _ = demo_nccl.judge(0, ["PASS"], {"nccl-b.log": self.TRAPPED}, "2.28.9")
        self.assertFalse(ok)

    def test_the_demo_logs_init_and_coll(self):
        env = demo_nccl.demo_environment({"LD_LIBRARY_PATH": "/k"}, {"nccl_library": "/n/libnccl.so.2"}, "/logs")
        self.assertEqual((env["NCCL_DEBUG"], env["NCCL_DEBUG_SUBSYS"]), ("INFO", "INIT,COLL"))
        self.assertEqual(env["NCCL_DEBUG_FILE"], "/logs/nccl-%h-%p.log")
        self.assertEqual(env["LD_LIBRARY_PATH"], "/n:/k")


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
        self.assertEqual(nccl_ctypes.RESULT_NAMES[self.nccl.async_error(None)], "ncclInvalidArgument")
        self.assertIn("NULL", self.nccl.last_error(None))

    def test_the_group_depth_probe_reads_ncclgroupend(self):
        # nccl-probe's reading of NCCL's group depth, on the real library:
        # at depth 0 ncclGroupEnd is ncclInvalidUsage; inside a group it is not.
        self.assertEqual(self.nccl.group_end(), nccl_ctypes.INVALID_USAGE)
        self.assertEqual(self.nccl.group_start(), nccl_ctypes.SUCCESS)
        first, second = self.nccl.group_end(), self.nccl.group_end()
        self.assertEqual((first, second), (nccl_ctypes.SUCCESS, nccl_ctypes.INVALID_USAGE))
        self.assertTrue(nccl_probe.group_depth_verdict(first, second).startswith("1: left inside a group"))
        self.assertTrue(nccl_probe.group_depth_verdict(second, second).startswith("0 "))

    def test_the_fault_tolerance_calls_follow_the_version(self):
        code = self.nccl.version_code
        self.assertEqual(self.nccl.revoke_fn is not None, code >= 22807)
        self.assertEqual(self.nccl.grow_fn is not None, code >= 22900)
        self.assertEqual(self.nccl.shrink_fn is not None, code >= 22700)


class ValidateTest(unittest.TestCase):
    def test_the_plan_fits_one_device_call(self):
        self.assertLessEqual(validate.PLAN_LIMIT_S, 480)
        self.assertLessEqual(validate.plan_seconds(), validate.PLAN_LIMIT_S)
        self.assertLessEqual(validate.DEVICE_CALL_LIMIT_S, 600)
        self.assertEqual(len({s.name for s in validate.PLAN}), len(validate.PLAN))

    def test_the_demo_on_nccl_comes_first(self):
        default = [s.name for s in validate.select_steps(None)]
        self.assertEqual(default[0], "demo-nccl")
        self.assertTrue(validate.PLAN[0].gathers_environment)
        for a, b in (("environment", "nccl-probe"), ("nccl-probe", "torch-watchdog"),
                     ("torch-watchdog", "demo-pytorch-nccl"), ("demo-pytorch-nccl", "recovery-timing"),
                     ("recovery-timing", "fault-sigkill"), ("fault-sigkill", "fault-sigstop"),
                     ("fault-sigstop", "collectives-4"), ("collectives-4", "profiler")):
            self.assertLess(default.index(a), default.index(b), (a, b))
        out = io.StringIO()
        with redirect_stdout(out):
            self.assertEqual(validate.main(["--print-plan"]), 0)
        lines = out.getvalue().splitlines()
        self.assertTrue(lines[1].startswith("demo-nccl "), lines[1])
        total = next(line for line in lines if line.startswith("total"))
        self.assertEqual(int(total.split()[1]), validate.plan_seconds())

    def test_rank_faults_step_runs_the_bench_on_nccl(self):
        step = next(s for s in validate.PLAN if s.name == "rank-faults-nccl")
        ctx = {"kit": type("K", (), {"build_dir": "/kit/build"})(), "out": "/logs",
               "env": {"cudart_library": "/usr/lib/libcudart.so.13"}}
        argv = step.argv(ctx)
        self.assertTrue(argv[1].endswith("scripts/bench_rank_faults.py"), argv)
        for want in ("--nccl", "/kit/build", "--cuda-library=/usr/lib/libcudart.so.13",
                     "/logs/rank_faults.json"):
            self.assertIn(want, argv)
        self.assertEqual(argv[argv.index("--faults") + 1:argv.index("--faults") + 3],
                         ["stop", "busy"])

    def test_what_was_cut_stays_on_request(self):
        cut = {"collectives-2", "fault-stall", "fault-error", "bandwidth", "recordings",
               "rank-faults-nccl"}
        self.assertEqual({s.name for s in validate.PLAN if s.on_request}, cut)
        self.assertEqual(validate.plan_seconds(), sum(s.budget_s for s in validate.PLAN if s.name not in cut))
        self.assertNotIn("bandwidth", [s.name for s in validate.select_steps(None)])
        a = validate.parse_args(["--out", "x", "--only", "bandwidth"])
        self.assertEqual([s.name for s in validate.select_steps(a.only)], ["environment", "bandwidth"])

    def test_a_gpu_step_alone_brings_the_environment(self):
        self.assertEqual([s.name for s in validate.select_steps(["fault-sigkill"])],
                         ["environment", "fault-sigkill"])
        self.assertEqual([s.name for s in validate.select_steps(["demo-nccl"])], ["demo-nccl"])
        self.assertEqual([s.name for s in validate.select_steps(["kit"])], ["kit"])

    def ctx(self, out):
        k = type("K", (), {"root": "/k", "build_dir": "/k/build"})()
        return {"kit": k, "env": {"cudart_library": "/c/libcudart.so.13"}, "env_json": "/e.json",
                "common": ["--kit", "/k", "--env-json", "/e.json", "--out", out], "ld_library_path": ""}

    def test_the_new_steps_argv_parse_and_fit_their_budgets(self):
        steps = {s.name: s for s in validate.PLAN}
        modules = {"demo-nccl": demo_nccl, "nccl-probe": nccl_probe, "torch-watchdog": torch_watchdog,
                   "recovery-timing": recovery}
        for name, module in modules.items():
            argv = steps[name].argv(self.ctx("/o"))
            self.assertEqual(argv[1], module.__file__.replace(".pyc", ".py"), name)
            a = module.parser().parse_args(argv[2:])
            self.assertEqual((a.kit, a.env_json, a.out), ("/k", "/e.json", "/o"), name)
            if name == "demo-nccl":
                # two jobs, each bounded, and the environment first
                self.assertEqual(a.job_timeout, validate.DEMO_JOB_TIMEOUT_S)
                self.assertGreaterEqual(steps[name].budget_s,
                                        2 * a.job_timeout + demo_nccl.ENVIRONMENT_TIMEOUT_S - 5)
            else:
                # the launcher's own deadline, with room to report and to be swept
                self.assertLessEqual(a.max_seconds + 5, steps[name].budget_s, name)
        self.assertEqual(recovery.parser().parse_args(steps["recovery-timing"].argv(self.ctx("/o"))[2:]).sizes, "4,8")
        argv = steps["demo-pytorch-nccl"].argv(self.ctx("/o"))
        timeout = float(argv[argv.index("--job-timeout") + 1])
        self.assertLessEqual(2 * timeout, steps["demo-pytorch-nccl"].budget_s - 10)
        self.assertIn("--cuda-library=/c/libcudart.so.13", argv)

    def test_build_kit_prints_a_device_call_limit(self):
        with open(os.path.join(REPO, "scripts", "gpu", "build_kit.sh")) as f:
            text = f.read()
        snippet = re.search(r"limit=\$\(python3 -c '(.*?)'\)", text, re.S).group(1)
        p = subprocess.run([sys.executable, "-c", snippet], capture_output=True, text=True, cwd=REPO)
        self.assertEqual(p.returncode, 0, p.stderr)
        self.assertLessEqual(int(p.stdout), 600)
        self.assertGreaterEqual(int(p.stdout), validate.plan_seconds())

    def test_the_config_is_ncclconfig_of_2_28(self):
        self.assertEqual(ctypes.sizeof(nccl_ctypes.Config), 80)
        self.assertEqual(nccl_ctypes.Config.blocking.offset, 16)
        self.assertEqual(nccl_ctypes.Config.netName.offset, 32)
        self.assertEqual(nccl_ctypes.Config.trafficClass.offset, 44)
        self.assertEqual(nccl_ctypes.Config.commName.offset, 48)
        self.assertEqual(nccl_ctypes.Config.nvlinkCentricSched.offset, 76)
        c = nccl_ctypes.non_blocking_config()
        self.assertEqual((c.size, c.magic, c.blocking), (80, 0xCAFEBEEF, 0))
        self.assertEqual(nccl_ctypes.config(True).blocking, 1)

    def test_slots_outlive_their_callers(self):
        def make():
            slot = nccl_ctypes.comm_slot()
            return ctypes.addressof(slot)

        address = make()
        self.assertIn(address, [ctypes.addressof(x) for x in nccl_ctypes._KEPT if isinstance(x, ctypes.c_void_p)])

    def test_unknown_steps_are_refused(self):
        with self.assertRaises(SystemExit):
            validate.parse_args(["--out", "x", "--only", "nosuch"])
        with self.assertRaises(SystemExit):
            validate.parse_args([])

    def test_profiler_verdict_comes_from_the_correctness_steps(self):
        ok = {"status": "pass", "details": {"profiler_problems": [], "communicators": [{}]}}
        self.assertEqual(validate.derive_profiler({"collectives-4": ok})["status"], "pass")
        bad = {"status": "pass", "details": {"profiler_problems": ["rank 0: x"], "communicators": [{}]}}
        self.assertEqual(validate.derive_profiler({"collectives-2": ok, "collectives-4": bad})["status"], "fail")
        self.assertEqual(validate.derive_profiler({})["status"], "not run")

    def test_report(self):
        probe_table = nccl_probe.table(ProbeTest.findings())
        report = {"kit": {"commit": "abc"}, "started": "now", "seconds": 1.0, "environment": {"device": "H100"},
                  "steps": [{"name": "fault-sigkill", "status": "pass", "seconds": 3, "budget_s": 30, "problems": [],
                             "details": {"case": "sigkill", "bound_ms": 1000,
                                         "rows": [{"rank": 1, "error": "ncclRemoteError", "detect_ms": 2.0,
                                                   "abort_ms": 5.0, "names_culprit": True}]},
                             "gpu_apps": "pid, used_gpu_memory [MiB]\n4242, 500 MiB"},
                            {"name": "nccl-probe", "status": "pass", "seconds": 20, "budget_s": 45, "problems": [],
                             "details": {"table": probe_table}, "gpu_apps": "pid, used_gpu_memory [MiB]"},
                            {"name": "torch-watchdog", "status": "fail", "seconds": 20, "budget_s": 36,
                             "problems": ["x"], "details": {"table": torch_watchdog.table(WatchdogTest.report())}},
                            {"name": "recovery-timing", "status": "timeout", "seconds": 55, "budget_s": 55,
                             "problems": ["did not end"], "details": {"table": recovery.table([RecoveryTest.row()])},
                             "processes": {"left": [{"pid": 77, "cmdline": "python3 recovery.py --worker"}],
                                           "killed": [{"pid": 77, "cmdline": "python3 recovery.py --worker"}]}}]}
        with tempfile.TemporaryDirectory() as out, tempfile.TemporaryDirectory() as logs:
            for name in ("a.log", "probe.md", "x.bin"):
                with open(os.path.join(logs, name), "w") as f:
                    f.write("x")
            validate.write_report(out, report, logs)
            self.assertEqual(sorted(os.listdir(out)), ["logs.tar.gz", "report.json", "report.md"])
            with open(os.path.join(out, "report.md")) as f:
                md = f.read()
            import tarfile
            with tarfile.open(os.path.join(out, "logs.tar.gz")) as tar:
                self.assertEqual(sorted(tar.getnames()), ["a.log", "probe.md"])
        self.assertIn("| sigkill | 1 | ncclRemoteError | 2.0 | 1000 | 5.0 | True |", md)
        self.assertIn("- device: H100", md)
        self.assertIn("## NCCL probe", md)
        self.assertIn("(i) group depth", md)
        self.assertIn("## PyTorch's watchdog", md)
        self.assertIn("## Recovery timing", md)
        self.assertIn("| recovery-timing | timeout | 77 | yes | python3 recovery.py --worker |", md)
        self.assertIn("- fault-sigkill: 4242, 500 MiB", md)
        self.assertNotIn("- nccl-probe:", md)


class ProbeTest(unittest.TestCase):
    @staticmethod
    def member(rank, child_ready=False):
        lat = {"median_us": 100.0, "p99_us": 150.0, "mean_us": 110.0, "iterations": 1000,
               "in_progress_returns": 0, "polls": 0, "value": 4.0}
        shrink = {"revoke": {"rc": "ncclSuccess", "state": "ncclRemoteError", "ms": 3.0},
                  "rc": "ncclRemoteError", "newcomm_null_after_call": True, "ready": child_ready,
                  "abort_parent_ms": 400.0}
        return {"role": "member", "rank": rank, "latency": {"blocking": lat, "non-blocking": dict(lat, median_us=130.0)},
                "abort": {"rc": "ncclSuccess", "ms": 500.0},
                "revoke_then_abort": {"revoke": {"rc": "ncclSuccess", "state": "ncclSuccess", "ms": 480.0},
                                      "abort_rc": "ncclSuccess", "abort_ms": 20.0, "total_ms": 500.0},
                "parallel_abort": {"communicators": 4, "wall_ms": 520.0, "each_ms": [500.0, 510.0, 505.0, 520.0],
                                   "rc": ["ncclSuccess"]},
                "fault": {"error": "ncclRemoteError", "error_mono": 10.004}, "shrink": shrink}

    @classmethod
    def findings(cls):
        probe = {"role": "probe", "error": "ncclRemoteError", "error_mono": 5.002,
                 "revoke": {"rc": "ncclSuccess", "state": "ncclRemoteError", "ms": 2.0},
                 "destroy": {"rc": "ncclRemoteError", "ms": 0.1}, "group_end": ["ncclSuccess", "ncclInvalidUsage"],
                 "group_depth_after_destroy": "1: left inside a group"}
        problems, findings = nccl_probe.summarize(probe, {r: cls.member(r) for r in range(3)}, 5.0, 10.0)
        assert problems == [], problems
        return findings

    def test_the_findings_and_their_table(self):
        f = self.findings()
        self.assertEqual(f["group_depth"]["detect_ms"], 2.0)
        self.assertEqual(f["members"][0]["fault"]["detect_ms"], 4.0)
        md = nccl_probe.table(f)
        self.assertIn("| ncclRemoteError (2.0 ms) | ncclSuccess, ncclRemoteError, 2.0 | ncclRemoteError, 0.1 | "
                      "ncclSuccess, ncclInvalidUsage | 1: left inside a group |", md)
        self.assertIn("| 0 | ncclRemoteError (4.0) | ncclSuccess, ncclRemoteError, 3.0 | ncclRemoteError | True |", md)
        self.assertIn("| ncclCommAbort alone | 500.0 |", md)
        self.assertIn("| 4 communicators aborted on 4 threads (wall) | 520.0 |", md)
        self.assertIn("| non-blocking | 130.0 | 150.0 | 110.0 | 0 |", md)

    def test_missing_or_wrong_parts_are_problems(self):
        members = {r: self.member(r) for r in range(3)}
        members[1] = {"rank": 1, "error": "TimeoutError: x"}
        members[2]["latency"]["blocking"]["value"] = 3.0
        members[0]["shrink"]["child_all_reduce"] = 4.0
        problems, _ = nccl_probe.summarize(None, members, None, 10.0)
        self.assertTrue(any(p.startswith("(i) the probe reported nothing") for p in problems), problems)
        self.assertTrue(any("member 1 failed" in p for p in problems), problems)
        self.assertTrue(any("blocking 8 B all-reduce gave 3.0" in p for p in problems), problems)
        self.assertTrue(any("shrunk communicator's all-reduce gave 4.0" in p for p in problems), problems)
        hung = dict(self.findings()["group_depth"], destroy="did not return", role="probe")
        problems, _ = nccl_probe.summarize(hung, {r: self.member(r) for r in range(3)}, 5.0, 10.0)
        self.assertEqual(problems, ["(i) ncclCommDestroy of the revoked, errored communicator did not return"])


class WatchdogTest(unittest.TestCase):
    KILLED_LOG = ("[rank1]:[E ProcessGroupNCCL.cpp:1] [Rank 1] To avoid data inconsistency, we are taking the "
                  "entire process down.\nterminate called after throwing an instance of 'c10::DistBackendError'\n")

    @classmethod
    def report(cls):
        dead = [torch_watchdog.judge_survivor(r, -6, {"error": "DistBackendError: x"}, None, cls.KILLED_LOG)
                for r in (0, 1, 3)]
        alive = [torch_watchdog.judge_survivor(r, 0, {"error": "ncclCommGetAsyncError: ncclRemoteError"},
                                               {"alive_after_s": 6.0, "abort": {"did": {}, "ms": 12.0}}, "")
                 for r in (0, 1, 3)]
        return {"window_s": 6, "dump_wait_ms": 500,
                "jobs": {"torch-defaults": {"verdict": torch_watchdog.judge("torch-defaults", dead)[0],
                                            "survivors": dead, "applied": {}},
                         "package": {"verdict": torch_watchdog.judge("package", alive)[0], "survivors": alive,
                                     "applied": {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"}}}}

    def test_a_survivor_torch_killed_is_named_so(self):
        row = torch_watchdog.judge_survivor(1, -6, {"error": "x"}, None, self.KILLED_LOG)
        self.assertEqual(row["outcome"], "killed by torch (SIGABRT)")
        self.assertEqual(row["markers"], ["taking the entire process down"])
        self.assertEqual(torch_watchdog.judge_survivor(1, -9, {"error": "x"}, None, "")["outcome"], "killed (SIGKILL)")
        self.assertEqual(torch_watchdog.judge_survivor(1, None, None, None, "")["outcome"],
                         "still running at the deadline")

    def test_the_package_must_keep_every_survivor(self):
        rep = self.report()
        self.assertEqual(rep["jobs"]["torch-defaults"]["verdict"], "killed by torch (SIGABRT)")
        self.assertEqual(rep["jobs"]["package"]["verdict"], "survived")
        # torch's defaults are recorded, not judged
        self.assertEqual(torch_watchdog.judge("torch-defaults", rep["jobs"]["torch-defaults"]["survivors"])[1], [])
        self.assertEqual(torch_watchdog.judge("package", rep["jobs"]["package"]["survivors"])[1], [])
        verdict, problems = torch_watchdog.judge("package", rep["jobs"]["torch-defaults"]["survivors"])
        self.assertEqual(verdict, "killed by torch (SIGABRT)")
        self.assertTrue(problems and "did not survive" in problems[0], problems)
        mixed = rep["jobs"]["package"]["survivors"][:2] + [
            torch_watchdog.judge_survivor(3, 1, {"error": None, "failed": "RuntimeError: y"}, None, "")]
        verdict, problems = torch_watchdog.judge("package", mixed)
        self.assertTrue(verdict.startswith("mixed: "))
        self.assertTrue(any("never saw an error" in p and "RuntimeError: y" in p for p in problems), problems)

    def test_table(self):
        md = torch_watchdog.table(self.report())
        self.assertIn("| torch-defaults | 0 | DistBackendError: x (-) | killed by torch (SIGABRT) | -6 |", md)
        self.assertIn("| package | 3 | ncclCommGetAsyncError: ncclRemoteError (-) | survived | 0 | - | 12.0 ms |", md)
        self.assertIn("package: survived; variables the package applied: TORCH_NCCL_ASYNC_ERROR_HANDLING=0", md)

    def test_the_package_settings_come_from_the_package(self):
        # The package job's workers apply them through nccl_resilient itself
        # (torch_watchdog.package_environment), in a process of their own.
        code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import torch_watchdog as t; "
                "applied = t.package_environment(); from nccl_resilient import distributed as d; "
                "print(json.dumps([applied, d.nccl_settings(), d.nccl_settings('2.11.0')]))")
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("TORCH_NCCL_", "NCCL_")) and k != "BUILD_DIR"}
        p = subprocess.run([sys.executable, "-c", code, os.path.dirname(os.path.abspath(__file__))],
                           capture_output=True, text=True, env=env, timeout=60)
        if p.returncode != 0 and ("LibraryNotFound" in p.stderr or "No module named" in p.stderr):
            self.skipTest(f"nccl_resilient cannot load here: {p.stderr.strip().splitlines()[-1]}")
        self.assertEqual(p.returncode, 0, p.stderr)
        applied, settings, on_the_gpu_machine = json.loads(p.stdout)
        self.assertEqual({k: applied.get(k) for k in settings}, settings)
        # On the GPU machine's torch (2.x), what keeps its watchdog from ending the survivors.
        self.assertEqual(on_the_gpu_machine.get("TORCH_NCCL_ASYNC_ERROR_HANDLING"), "0", on_the_gpu_machine)


class RecoveryTest(unittest.TestCase):
    @staticmethod
    def survivor(rank, fallback=True):
        s = {"rank": rank, "nccl_version": "2.28.9", "abort_init_ms": 900.0 + rank, "abort_init_value": 4.0,
             "revoke_ms": 500.0, "revoke_shrink_ms": 1500.0, "shrink_value": 3.0, "grow": "not in this NCCL",
             "c_error": "ncclRemoteError", "c_revoke": {"rc": "ncclSuccess", "state": "ncclRemoteError", "ms": 2.0},
             "c_shrink": {"rc": "ncclRemoteError", "newcomm_null_after_call": True, "child": None, "ms": 1.0},
             "c_fallback": fallback}
        if fallback:
            s.update({"c_abort_ms": 450.0 + rank, "c_reinit_ms": 1400.0, "c_total_ms": 1410.0, "c_reinit_value": 4.0})
        return s

    @classmethod
    def row(cls):
        results = {r: cls.survivor(r) for r in range(3)}
        results[4] = {"rank": 4, "abort_init_value": 4.0, "c_reinit_value": 4.0}
        row, problems = recovery.row_of(4, results)
        assert problems == [], problems
        return row

    def test_the_row_after_a_kill(self):
        row = self.row()
        self.assertEqual(row["abort_init_ms"], 902.0)
        self.assertEqual(row["kill"]["shrink_rc"], ["ncclRemoteError"])
        self.assertEqual(row["kill"]["abort_ms"], 452.0)
        self.assertEqual(row["kill"]["total_ms"], 1410.0)
        md = recovery.table([row])
        self.assertIn("| 4 | 2.28.9 | 902.0 | 500.0 | 1500.0 | not in this NCCL |", md)
        self.assertIn("| 4 | ncclRemoteError | ncclSuccess/ncclRemoteError | 2.0 | ncclRemoteError | True |", md)

    def test_wrong_values_and_missing_workers_are_problems(self):
        results = {r: self.survivor(r) for r in range(3)}
        results[4] = {"rank": 4, "c_reinit_value": 3.0}
        _, problems = recovery.row_of(4, results)
        self.assertEqual(problems, ["4 members: rank 4 c_reinit_value 3.0, not 4.0"])
        del results[1]
        row, problems = recovery.row_of(4, results)
        self.assertIsNone(row)
        self.assertIn("workers [1] reported nothing", problems[0])
        results = {r: self.survivor(r) for r in range(3)}
        results[2] = dict(results[2])
        del results[2]["c_total_ms"]
        results[4] = {"rank": 4}
        _, problems = recovery.row_of(4, results)
        self.assertTrue(any("not timed on every survivor" in p for p in problems), problems)


class Ranks:
    """The workers of one walk-through, each a thread over kit_fakes."""

    def __init__(self, run_dir, deadline):
        self.run_dir = run_dir
        self.deadline = deadline
        self.results, self.threads = {}, {}

    def args(self, rank, **kw):
        import argparse
        return argparse.Namespace(rank=rank, run_dir=self.run_dir, nccl_lib="fake", deadline=self.deadline,
                                  result=os.path.join(self.run_dir, f"{kw.pop('name', 'worker')}-rank{rank}.json"),
                                  **kw)

    def start(self, key, fn):
        def body():
            try:
                self.results[key] = fn()
            except kit_fakes.Killed:
                self.results[key] = "killed"
            except Exception as e:  # the test shows it
                self.results[key] = f"{type(e).__name__}: {e}"
        t = threading.Thread(target=body, daemon=True)
        self.threads[key] = t
        t.start()

    def join(self, keys):
        for k in keys:
            self.threads[k].join(max(0.0, self.deadline - time.monotonic()) + 1)
            self.assert_done(k)

    def assert_done(self, k):
        if self.threads[k].is_alive():
            raise AssertionError(f"worker {k} still runs at the deadline (a missing exchange?)")

    def wait_file(self, path):
        while not os.path.exists(path):
            failed = {k: v for k, v in self.results.items() if isinstance(v, str) and v != "killed"}
            if failed or time.monotonic() > self.deadline:
                raise AssertionError(f"{path} never appeared; failed workers: {failed}")
            time.sleep(0.005)

    def uid(self, name):
        """The unique id rank 0 published under `name` (kit.exchange's file)."""
        path = os.path.join(self.run_dir, f"{name}.0")
        self.wait_file(path)
        with open(path) as f:
            value = json.load(f)
        return value[0] if isinstance(value, list) else value


def launcher_ref_count():
    """NCCL_NET_PLUGIN_REF_COUNT as the kit's launchers give it to their
    workers (kit.nccl_environment through our plugin)."""
    class OneFile:
        def path(self, role):
            return f"/kit/{role}.so"
    env = kit.nccl_environment({}, kit=OneFile())
    return int(env.get("NCCL_NET_PLUGIN_REF_COUNT", "0"))


class WalkThroughTest(unittest.TestCase):
    """The probe's and the recovery step's workers, every phase, each rank a
    thread over kit_fakes (NCCL 2.28.9's behaviour where the workers rely on
    it): no exchange may be missing, every result must reach its table."""

    def test_the_nccl_probe(self):
        run_dir = tempfile.mkdtemp(prefix="walk-probe-")
        self.addCleanup(shutil.rmtree, run_dir, True)
        world = kit_fakes.World()
        ranks = Ranks(run_dir, time.monotonic() + 30)

        def rank(a, index, dies=False):
            w = nccl_probe.Worker(a, torch=kit_fakes.FakeTorch(), nccl=kit_fakes.FakeNccl(world, dies, net_plugin_ref_count=launcher_ref_count()))
            return nccl_probe.probe_worker(a, w, index) if a.role != "member" else nccl_probe.member_worker(a, w)

        probe = ranks.args(nccl_probe.PROBE_RANK, role="probe", name="probe")
        ranks.start("probe", lambda: rank(probe, 0))
        ranks.start("victim", lambda: rank(ranks.args(nccl_probe.VICTIM_RANK, role="victim", name="victim"), 1,
                                           dies=True))
        ranks.wait_file(probe.result + ".ready")
        t_kill_pair = time.monotonic()
        world.break_uid(ranks.uid("d-uid"))
        ranks.join(["probe", "victim"])
        self.assertEqual(ranks.results["victim"], "killed")
        with open(os.path.join(run_dir, "go"), "w"):
            pass
        for r in range(nccl_probe.MEMBERS):
            a = ranks.args(r, role="member", name="member")
            ranks.start(r, lambda a=a, r=r: rank(a, r, dies=r == nccl_probe.LOST))
        for r in range(nccl_probe.MEMBERS):
            ranks.wait_file(os.path.join(run_dir, f"member-rank{r}.json.ready"))
        t_kill = time.monotonic()
        world.break_uid(ranks.uid("c-uid"))
        ranks.join(range(nccl_probe.MEMBERS))
        self.assertEqual(ranks.results[nccl_probe.LOST], "killed")
        problems, findings = nccl_probe.summarize(ranks.results["probe"],
                                                  {r: ranks.results[r] for r in range(3)}, t_kill_pair, t_kill)
        self.assertEqual(problems, [], ranks.results)
        self.assertTrue(findings["group_depth"]["group_depth_after_destroy"].startswith("1: left inside a group"))
        self.assertEqual(findings["group_depth"]["destroy"]["rc"], "ncclRemoteError")
        for r in range(3):
            m = findings["members"][r]
            self.assertEqual(m["shrink"]["revoke"]["state"], "ncclRemoteError")
            self.assertEqual((m["shrink"]["rc"], m["shrink"]["newcomm_null_after_call"]), ("ncclRemoteError", True))
            self.assertFalse(m["shrink"]["ready"])
            self.assertEqual(m["latency"]["non-blocking"]["in_progress_returns"], nccl_probe.LATENCY_ITERATIONS)
            self.assertEqual(m["latency"]["blocking"]["in_progress_returns"], 0)
            self.assertEqual(m["revoke_then_abort"]["revoke"]["state"], "ncclSuccess")
            self.assertEqual(len(m["parallel_abort"]["each_ms"]), nccl_probe.PARALLEL_COMMS)
        md = nccl_probe.table(findings)
        self.assertIn("| 1: left inside a group (the first ncclGroupEnd gave ncclSuccess) |", md)
        self.assertIn("| blocking |", md)

    def test_a_fault_free_shrink_polls_the_parent(self):
        # Without the kill, the shrink of (ii) works only if the parent is
        # polled: the child is NULL until the parent leaves ncclInProgress.
        world = kit_fakes.World()
        nccl = kit_fakes.FakeNccl(world)
        ranks = Ranks(tempfile.mkdtemp(prefix="walk-shrink-"), time.monotonic() + 10)
        self.addCleanup(shutil.rmtree, ranks.run_dir, True)
        w = nccl_probe.Worker(ranks.args(0, role="member"), torch=kit_fakes.FakeTorch(), nccl=nccl)
        comm = w.non_blocking(nccl.unique_id(), 4, 0, "init")
        self.assertEqual(nccl.async_error(nccl_ctypes.comm_slot()), nccl_ctypes.INVALID_ARGUMENT)  # R1's trap
        sh = nccl_probe.shrink_after_fault(w, comm, 0)
        self.assertEqual((sh["rc"], sh["newcomm_null_after_call"], sh["parent_state"]), ("ncclSuccess", True, "ncclSuccess"))
        self.assertIsNotNone(sh["child_appeared_ms"])
        self.assertEqual((sh["child_state"], sh["child_all_reduce"], sh["ready"]), ("ncclSuccess", 3.0, True))

    def test_the_torch_watchdog_survivors(self):
        run_dir = tempfile.mkdtemp(prefix="walk-watchdog-")
        self.addCleanup(shutil.rmtree, run_dir, True)
        world = kit_fakes.World()
        ranks = Ranks(run_dir, time.monotonic() + 20)
        uid = "torch-job"

        def rank(r):
            a = ranks.args(r, config="package", window=0.2, name="package")
            nccl = kit_fakes.FakeNccl(world, dies_on_fault=r == torch_watchdog.VICTIM)
            torch_watchdog.survivor(a, kit_fakes.FakeTorch(), kit_fakes.FakeDist(nccl, uid),
                                    nccl, {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"},
                                    abort=lambda seconds: {"did": {"pg": "abort"}, "ms": 1.0})

        for r in range(torch_watchdog.NRANKS):
            ranks.start(r, lambda r=r: rank(r))
        for r in range(torch_watchdog.NRANKS):
            ranks.wait_file(os.path.join(run_dir, f"package-rank{r}.json.ready"))
        world.break_uid(uid)
        ranks.join(range(torch_watchdog.NRANKS))
        self.assertEqual(ranks.results[torch_watchdog.VICTIM], "killed")
        rows = []
        for r in (0, 1, 3):
            base = os.path.join(run_dir, f"package-rank{r}.json")
            err, final = kit.read_json(base + ".error"), kit.read_json(base)
            self.assertEqual(err["applied"], {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "0"})
            self.assertGreaterEqual(final["alive_after_s"], 0.2)
            self.assertEqual(final["abort"], {"did": {"pg": "abort"}, "ms": 1.0})
            rows.append(torch_watchdog.judge_survivor(r, 0, err, final, ""))
        verdict, problems = torch_watchdog.judge("package", rows)
        self.assertEqual((verdict, problems), ("survived", []))
        self.assertTrue(all(r["error"] for r in rows), rows)

    def run_recovery(self, n, grow):
        run_dir = tempfile.mkdtemp(prefix=f"walk-recovery-{n}-")
        self.addCleanup(shutil.rmtree, run_dir, True)
        world = kit_fakes.World()
        ranks = Ranks(run_dir, time.monotonic() + 30)

        def rank(r):
            a = ranks.args(r, members=n)
            w = recovery.Worker(a, torch=kit_fakes.FakeTorch(),
                                nccl=kit_fakes.FakeNccl(world, dies_on_fault=r == n - 1, grow=grow,
                                                      net_plugin_ref_count=launcher_ref_count()))
            return recovery.run_phases(w)

        for r in range(n + 1):
            ranks.start(r, lambda r=r: rank(r))
        for r in range(n):
            ranks.wait_file(os.path.join(run_dir, f"worker-rank{r}.json.ready"))
        world.break_uid(ranks.uid("c-uid"))
        ranks.join(range(n + 1))
        self.assertEqual(ranks.results[n - 1], "killed")
        results = {r: v for r, v in ranks.results.items() if r != n - 1}
        for r, v in results.items():
            self.assertIsInstance(v, dict, f"rank {r}: {v}")
        row, problems = recovery.row_of(n, results)
        self.assertEqual(problems, [], results)
        return row

    def test_the_recovery_step(self):
        row = self.run_recovery(4, grow=True)
        self.assertEqual(row["grow"], "timed")
        self.assertIsNotNone(row["revoke_shrink_grow_ms"])
        k = row["kill"]
        self.assertEqual((k["shrink_rc"], k["newcomm_null_after_call"], k["fallback"]),
                         (["ncclRemoteError"], [True], True))
        self.assertEqual(k["revoke"], ["ncclInProgress/ncclRemoteError"])  # non-blocking: in progress, then the error
        self.assertIsNotNone(k["total_ms"])
        self.assertIn("| 4 | ncclRemoteError | ncclInProgress/ncclRemoteError |", recovery.table([row]))

    def test_the_recovery_step_without_grow(self):
        row = self.run_recovery(2, grow=False)
        self.assertEqual(row["grow"], "not in this NCCL")
        self.assertIsNotNone(row["revoke_shrink_ms"])
        self.assertTrue(row["kill"]["fallback"])


SPAWN_AND_HANG = r"""
import os, subprocess, sys, time
d = sys.argv[1]
# a child in its own session that ignores SIGTERM, carrying the marker by inheritance
a = subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"],
                     start_new_session=True)
# a child in its own session with an empty environment, named by the step's TMPDIR on its command line
b = subprocess.Popen([sys.executable, "-c", "import sys, time; time.sleep(300)", os.environ["TMPDIR"]],
                     start_new_session=True, env={})
with open(os.path.join(d, "pids"), "w") as f:
    f.write(f"{a.pid} {b.pid}")
time.sleep(300)
"""


def alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class SweepTest(unittest.TestCase):
    """A step over its budget ends every process of the step, not only its launcher."""

    def run_fake(self, budget_s, code, extra_env=None):
        d = tempfile.mkdtemp(prefix="sweep-")
        self.addCleanup(shutil.rmtree, d, True)
        step = validate.Step("fake", budget_s, "a step that overruns",
                             argv=lambda c: [sys.executable, "-c", code, d])
        ctx = {"ld_library_path": ""}
        old = dict(os.environ)
        os.environ.update(extra_env or {})
        try:
            r = validate.run_step(step, ctx, d)
        finally:
            os.environ.clear()
            os.environ.update(old)
        return d, r

    def test_an_overrun_ends_the_step_s_own_sessions(self):
        d, r = self.run_fake(1.5, SPAWN_AND_HANG)
        with open(os.path.join(d, "pids")) as f:
            a, b = (int(x) for x in f.read().split())
        self.assertEqual(r["status"], "timeout")
        deadline = time.monotonic() + 5
        while (alive(a) or alive(b)) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(a), "the child that ignored SIGTERM still runs")
        self.assertFalse(alive(b), "the child without the marker in its environment still runs")
        left = {p["pid"] for p in r["processes"]["left"]}
        killed = {p["pid"] for p in r["processes"]["killed"]}
        self.assertTrue({a, b} <= left, r["processes"])
        self.assertIn(a, killed)  # it ignored SIGTERM
        self.assertNotIn(b, killed)  # SIGTERM was enough
        self.assertTrue(any(f"pid {a} (SIGKILL)" in p for p in r["problems"]), r["problems"])
        with open(os.path.join(d, "fake.log")) as f:
            self.assertIn(f"validate: killed: pid {a}:", f.read())

    def test_a_step_on_time_leaves_nothing_and_logs_the_gpu(self):
        fake_bin = tempfile.mkdtemp(prefix="fake-smi-")
        self.addCleanup(shutil.rmtree, fake_bin, True)
        with open(os.path.join(fake_bin, "nvidia-smi"), "w") as f:
            f.write("#!/bin/sh\necho 'pid, used_gpu_memory [MiB]'\necho '4242, 512 MiB'\n")
        os.chmod(os.path.join(fake_bin, "nvidia-smi"), 0o755)
        code = ("import subprocess, sys; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(300)'], "
                "start_new_session=True); print('{\"ok\": true}')")
        d, r = self.run_fake(30, code, {"PATH": fake_bin + os.pathsep + os.environ["PATH"]})
        self.assertEqual(r["status"], "pass")
        self.assertEqual(len(r["processes"]["left"]), 1, r["processes"])  # the leftover, ended
        self.assertFalse(alive(r["processes"]["left"][0]["pid"]))
        self.assertEqual(r["gpu_apps"], "pid, used_gpu_memory [MiB]\n4242, 512 MiB")
        self.assertEqual(r["problems"], [])

    def test_only_the_step_s_processes_are_found(self):
        # Each child says it runs: until its exec, /proc/<pid>/environ is
        # still the parent's, without the marker (CI saw the race).
        started = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(60)"]
        other = subprocess.Popen(started, stdout=subprocess.PIPE,
                                 env=dict(os.environ, **{validate.STEP_MARKER: "other-1"}))
        mine = subprocess.Popen(started, stdout=subprocess.PIPE,
                                env=dict(os.environ, **{validate.STEP_MARKER: "fake-2"}))
        for p in (other, mine):
            self.assertEqual(p.stdout.readline(), b"up\n")
        try:
            found = {pid for pid, _ in validate.step_processes("fake-2", "/nonexistent-tmpdir")}
            self.assertIn(mine.pid, found)
            self.assertNotIn(other.pid, found)
            self.assertNotIn(os.getpid(), found)
        finally:
            for p in (other, mine):
                p.kill()
                p.wait()
                p.stdout.close()


if __name__ == "__main__":
    unittest.main()
