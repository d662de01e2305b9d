#!/usr/bin/env python3
"""resilient-run on its own (tools/run/, docs/restart.md "The agent"), with
shell one-liners as ranks: the environment it gives them, one new process per
abnormal end, the limits per rank and per node, the exit codes, --rank-env,
SLURM's variables, and the store it serves started again when it dies.

usage: test_agent.py RESILIENT_RUN"""
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import unittest

RUN = None


def agent(args, env=None, timeout=60):
    e = dict(os.environ, NCCL_RESILIENT_JOB_TOKEN="t")
    e.update(env or {})
    p = subprocess.run([RUN] + args, capture_output=True, text=True, env=e, timeout=timeout)
    return p.returncode, p.stdout, p.stderr


def sh(script):
    return ["--no-python", "--", "/bin/sh", "-c", script]


class AgentTest(unittest.TestCase):
    def test_environment_as_torchrun_sets_it(self):
        code, out, err = agent(["--nproc-per-node", "2", "--job", "env"] + sh(
            'echo "R=$RANK L=$LOCAL_RANK W=$WORLD_SIZE LW=$LOCAL_WORLD_SIZE G=$GROUP_RANK '
            'J=$NCCL_RESILIENT_RESTART_JOB X=$NCCL_RESILIENT_RESTART_EXIT_FOR_NEW_PROCESS '
            'N=$NCCL_RESILIENT_RESTART_JOIN S=${NCCL_RESILIENT_STORE_URL%%:*}"'))
        self.assertEqual(code, 0, err)
        lines = sorted(out.split("\n"))[1:]
        self.assertEqual(lines, ["R=0 L=0 W=2 LW=2 G=0 J=env X=1 N=0 S=tcp",
                                 "R=1 L=1 W=2 LW=2 G=0 J=env X=1 N=0 S=tcp"])

    def test_the_ranks_reach_the_store_through_the_node_s_proxy(self):
        # One client per node: the ranks get the agent's proxy on loopback,
        # which forwards to the job's store (here: one it serves).
        script = 'echo "S=$NCCL_RESILIENT_STORE_URL"'
        code, out, err = agent(["--nproc-per-node", "2", "--job", "p"] + sh(script))
        self.assertEqual(code, 0, err)
        served = re.search(r"serving the job's store on (tcp://\S+)", err).group(1)
        proxy = re.search(r"reach the job's store \S+ through (tcp://\S+)", err).group(1)
        self.assertNotEqual(served, proxy)
        self.assertEqual(sorted(out.split()), ["S=" + proxy] * 2)
        code, out, err = agent(["--nproc-per-node", "1", "--no-node-proxy"] + sh(script))
        self.assertEqual(code, 0, err)
        served = re.search(r"serving the job's store on (tcp://\S+)", err).group(1)
        self.assertEqual(out.split(), ["S=" + served])

    def test_one_new_process_per_abnormal_end(self):
        # Each rank's first process fails; its replacement joins and succeeds.
        code, out, err = agent(["--nproc-per-node", "2"] + sh(
            'if [ "$RESILIENT_RUN_PROCESS" = 0 ]; then exit 1; fi; '
            'echo "joined $RANK $NCCL_RESILIENT_RESTART_JOIN"'))
        self.assertEqual(code, 0, err)
        self.assertEqual(sorted(out.split()), sorted("joined 0 1 joined 1 1".split()))
        self.assertEqual(err.count("replacement process"), 2, err)

    def test_clean_exits_and_exit_75(self):
        code, out, err = agent(["--nproc-per-node", "1"] + sh(
            'if [ "$RESILIENT_RUN_PROCESS" = 0 ]; then exit 75; fi'))
        self.assertEqual(code, 0, err)
        self.assertIn("exit 75 (left for a new process)", err)

    def test_a_withdrawn_joiner_is_replaced_without_counting(self):
        # The 5 ms drill (seed 47): a joiner that withdrew (its number was
        # another process's, exit 76) counted against --node-max-restarts,
        # and a healthy node was left out. Now its replacement is not counted:
        # with limits of 1, the rank's process that withdraws twice and the
        # one that then fails are all replaced.
        code, out, err = agent(["--nproc-per-node", "1", "--max-restarts", "1",
                                "--node-max-restarts", "1"] + sh(
            'case "$RESILIENT_RUN_PROCESS" in 0|1) exit 76;; 2) exit 3;; esac; echo done'))
        self.assertEqual(code, 0, err)
        self.assertEqual(out.split(), ["done"], err)
        self.assertEqual(err.count("a joiner withdrew: its number was another process's"), 2, err)
        self.assertEqual(err.count("replacement process"), 3, err)

    def test_a_crash_loop_stops_at_the_rank_limit(self):
        code, out, err = agent(["--nproc-per-node", "1", "--max-restarts", "2"] + sh("exit 3"))
        self.assertEqual(code, 1, err)
        self.assertEqual(err.count("replacement process"), 2, err)
        self.assertIn("--max-restarts 2", err)

    def test_a_node_past_its_limit_is_left_out(self):
        code, out, err = agent(["--nproc-per-node", "3", "--node-max-restarts", "1"] +
                               sh("sleep 0.2; exit 3"))
        self.assertEqual(code, 1, err)
        self.assertEqual(err.count("replacement process"), 1, err)
        self.assertIn("left out", err)

    def test_rank_env_and_slurm(self):
        with tempfile.TemporaryDirectory() as d:
            code, out, err = agent(
                ["--nproc-per-node", "2", "--store", "tcp://127.0.0.1:0", "--host-store",
                 "--rank-env", "HOSTID=h-{rank}-{local_rank}", "--log-dir", d] +
                sh('echo "$RANK $HOSTID $WORLD_SIZE $NCCL_RESILIENT_RESTART_JOB"; '
                   'true'),
                env={"SLURM_NNODES": "3", "SLURM_NODEID": "2", "SLURM_JOB_ID": "77",
                     "NCCL_RESILIENT_STORE_TIMEOUT_MS": "1000"})
            out = "\n" + "".join(open(os.path.join(d, f"rank{r}.0.log")).read() for r in (4, 5))
        # Node 2 of 3 with 2 ranks each: ranks 4 and 5, the job id SLURM's.
        # (The other nodes' agents never come: this one, which serves the
        # store, waits for them a while, then ends.)
        self.assertEqual(sorted(out.split()), sorted("4 h-4-0 6 77 5 h-5-1 6 77".split()), err)

    def test_bad_usage(self):
        self.assertEqual(agent(["--nproc-per-node", "0"] + sh("true"))[0], 2)
        self.assertEqual(agent(["--nproc-per-node", "1"])[0], 2)
        self.assertEqual(agent(["--rank-env", "=x"] + sh("true"))[0], 1)

    def test_the_store_it_serves_is_started_again(self):
        e = dict(os.environ, NCCL_RESILIENT_JOB_TOKEN="t")
        p = subprocess.Popen([RUN, "--nproc-per-node", "1"] + sh("sleep 3"), env=e,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = p.stderr.readline()
        m = re.search(r"serving the job's store on (tcp://\S+) \(pid (\d+)\)", line)
        self.assertIsNotNone(m, line)
        self.assertIn("through", p.stderr.readline())  # the node's proxy
        self.assertIn("started", p.stderr.readline())
        os.kill(int(m.group(2)), signal.SIGKILL)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        self.assertRegex(err, r"serves again on " + re.escape(m.group(1)) + r" \(pid \d+\)")

    def test_a_dead_store_is_served_again_before_a_rank_that_died_with_it(self):
        # The agent drill with the store killed 5 ms after a SIGKILL: the
        # agent reaped the rank first and asked the dead store whether the
        # job had finished (2 s) before it served the store again, and the
        # ranks' restart failed its calls meanwhile. Both end while the agent
        # is stopped, the store younger than the rank (restarted once), so
        # that the rank is reaped first.
        with tempfile.TemporaryDirectory() as d:
            go, e = os.path.join(d, "go"), dict(os.environ, NCCL_RESILIENT_JOB_TOKEN="t")
            script = (f'if [ "$RESILIENT_RUN_PROCESS" = 0 ]; then '
                      f'while [ ! -e {go} ]; do sleep 0.01; done; exit 3; else sleep 1; fi')
            p = subprocess.Popen([RUN, "--nproc-per-node", "1"] + sh(script), env=e,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            m = re.search(r"\(pid (\d+)\)", p.stderr.readline())
            self.assertIn("through", p.stderr.readline())
            rank = re.search(r"started, pid (\d+)", p.stderr.readline())
            self.assertIsNotNone(rank)
            os.kill(int(m.group(1)), signal.SIGKILL)
            line = p.stderr.readline()
            while "serves again" not in line:
                line = p.stderr.readline()
                self.assertTrue(line, "the store was not served again")
            store = int(re.search(r"\(pid (\d+)\)", line).group(1))
            os.kill(p.pid, signal.SIGSTOP)
            os.kill(store, signal.SIGKILL)
            open(go, "w").close()
            deadline = time.monotonic() + 20
            while zombie_or_gone(int(rank.group(1))) is False and time.monotonic() < deadline:
                time.sleep(0.01)
            os.kill(p.pid, signal.SIGCONT)
            out, err = p.communicate(timeout=30)
            self.assertEqual(p.returncode, 0, err)
            served, ended = err.find("serves again", err.find(f"(pid {store})")), err.find("exit 3")
            self.assertGreater(served, 0, err)
            self.assertLess(served, ended, err)
            self.assertNotIn("cannot ask the store", err)


def zombie_or_gone(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True

if __name__ == "__main__":
    RUN = sys.argv.pop(1)
    unittest.main(verbosity=2)
