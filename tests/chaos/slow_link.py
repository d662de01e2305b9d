#!/usr/bin/env python3
"""A slow link among fast ones is named live, and nothing aborts (issue 22).

Three ranks of resilient-nettest, each in a network namespace of its own,
joined through a bridge in a fourth namespace (10.231.78.1-3), run a ring
all-reduce through the resilient plugin for --seconds. HTB limits rank 1's
interface to 10 % of the bandwidth one link carried unthrottled, measured
just before on the same path: the link rank 1 -> rank 2 is the slow one.
`resilient-inspect --job` watches the ranks' blackboxes live.

Checks: a slow-link report naming rank 1's address as the sending end and
rank 2's as the receiving end, within 10 s of the ranks' start of traffic;
no other link named; no fault in any rank (the run ends by its window,
every byte checked).

`--healthy`: the same without HTB: nothing may be reported (a false report
fails the test).

Needs root, `ip netns`, a bridge and `tc` (HTB); exits 77 without them.
usage: slow_link.py NETTEST PLUGIN INSPECT [--healthy] [--seconds S] [--json FILE]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from net_faults import collect, sh, throttle  # noqa: E402  (the namespaces' helpers)

SKIP = 77
N = 3
ADDR = [f"10.231.78.{r + 1}" for r in range(N)]
SIZE = 4 << 20
BOUND_S = 10.0  # the bound: named within 10 s


class Star:
    """N rank namespaces on a bridge in a hub namespace; removed on exit."""

    def __init__(self):
        tag = f"{os.getpid() % 100000}"
        self.hub = f"rslow{tag}h"
        self.ns = [f"rslow{tag}r{r}" for r in range(N)]
        self.dev = [f"rs{tag}r{r}" for r in range(N)]

    def __enter__(self):
        try:
            sh("ip", "netns", "add", self.hub)
            sh("ip", "-n", self.hub, "link", "add", "br0", "type", "bridge")
            sh("ip", "-n", self.hub, "link", "set", "br0", "up")
            for r in range(N):
                sh("ip", "netns", "add", self.ns[r])
                sh("ip", "link", "add", self.dev[r], "netns", self.ns[r], "type", "veth", "peer",
                   "name", f"{self.dev[r]}h", "netns", self.hub)
                sh("ip", "-n", self.hub, "link", "set", f"{self.dev[r]}h", "master", "br0")
                sh("ip", "-n", self.hub, "link", "set", f"{self.dev[r]}h", "up")
                sh("ip", "-n", self.ns[r], "addr", "add", f"{ADDR[r]}/24", "dev", self.dev[r])
                sh("ip", "-n", self.ns[r], "link", "set", self.dev[r], "up")
                sh("ip", "-n", self.ns[r], "link", "set", "lo", "up")
        except subprocess.CalledProcessError as e:
            self.__exit__()
            print(f"SKIP: cannot build the namespaces: {e.stderr.strip()}")
            sys.exit(SKIP)
        return self

    def __exit__(self, *exc):
        for ns in self.ns + [self.hub]:
            sh("ip", "netns", "del", ns, check=False)

    def run(self, r, *args):
        return sh("ip", "netns", "exec", self.ns[r], *args)

    def start_rank(self, r, cmd, port, bbdir):
        env = dict(os.environ, RANK=str(r), WORLD_SIZE=str(N), MASTER_ADDR=ADDR[0],
                   MASTER_PORT=str(port), NCCL_RESILIENT_SOCKET_IFNAME=f"={self.dev[r]}",
                   NCCL_RESILIENT_BLACKBOX_DIR=bbdir)
        return subprocess.Popen(["ip", "netns", "exec", self.ns[r]] + cmd, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def nettest_cmd(args, *extra):
    return [args.nettest, "--plugin", args.plugin, "--pattern", "allreduce", "-b", str(SIZE),
            "-e", str(SIZE), "-w", "1", "--timeout", "30", *extra]


def baseline_link_mbit(star, args, tmp):
    """What one link of the ring carried unthrottled (Mbit/s): algbw of the ring."""
    out = os.path.join(tmp, "baseline.json")
    procs = [star.start_rank(r, nettest_cmd(args, "-n", "30", "--json", out), 29600, tmp)
             for r in range(N)]
    results = collect(procs, 180)
    if any(rc != 0 for _, _, rc in results):
        sys.exit(f"FAIL: the unthrottled baseline run failed: {results}")
    with open(out) as f:
        row = json.load(f)["results"][0]
    # A ring all-reduce sends 2 (N-1)/N of the buffer over every link.
    return row["algbw_gbps"] * 8000 * 2 * (N - 1) / N


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("nettest")
    ap.add_argument("plugin")
    ap.add_argument("inspect")
    ap.add_argument("--healthy", action="store_true")
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    if os.geteuid() != 0 or shutil.which("ip") is None or shutil.which("tc") is None:
        print("SKIP: needs root, iproute2 and tc")
        sys.exit(SKIP)
    with Star() as star, tempfile.TemporaryDirectory() as tmp:
        bbdir = os.path.join(tmp, "blackbox")
        os.mkdir(bbdir)
        base = baseline_link_mbit(star, args, tmp)
        mbit = None
        rate = base
        if not args.healthy:
            mbit = max(8, int(base * 0.10))
            throttle(star, 1, mbit)
            rate = mbit
        # As many iterations as the slowest link carries in about --seconds.
        per_iter_bits = 2 * (N - 1) / N * SIZE * 8
        iters = max(20, int(args.seconds * rate * 1e6 / per_iter_bits))
        out = os.path.join(tmp, "run.json")
        procs = [star.start_rank(r, nettest_cmd(args, "-n", str(iters), "--json", out), 29700,
                                 bbdir)
                 for r in range(N)]
        # The blackboxes appear when the ranks load the plugin; the bound counts
        # from then (connection setup included).
        deadline = time.monotonic() + 60
        while len(os.listdir(bbdir)) < N and time.monotonic() < deadline:
            time.sleep(0.05)
        t0_wall = time.time_ns()
        watch = subprocess.Popen([args.inspect, "--job", "--dir", bbdir, "--json",
                                  "--interval-ms", "500", "--seconds", str(args.seconds)],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        results = collect(procs, args.seconds + 120)
        wout, werr = watch.communicate(timeout=60)
        failures = []
        for r in range(N):
            o, e, rc = results[r]
            if rc != 0:
                print(o[-2000:], e[-2000:])
                failures.append(f"rank {r} exited {rc} (a fault or a data error)")
        for name in os.listdir(bbdir):  # left by a rank that did not finish cleanly
            failures.append(f"blackbox {name} left behind")
        try:
            with open(out) as f:
                run = json.load(f)
            if run["errors"] != 0:
                failures.append(f"{run['errors']} data errors")
        except OSError:
            failures.append("no result from rank 0")
        reports = []
        rounds = 0
        standings = []
        for l in wout.splitlines():
            j = json.loads(l)
            if "report" in j:
                reports.append(j["report"])
            else:
                rounds += 1
                standings.append(j)
        if rounds == 0:
            failures.append(f"resilient-inspect --job printed nothing: {werr[-2000:]}")
        for rep in reports:
            ms = (rep["wall_ns"] - t0_wall) / 1e6
            print(f"report after {ms:.0f} ms: {rep['text']}")
        slow = [r for r in reports if r["kind"] == "slow link"]
        if args.healthy:
            if reports:
                failures.append(f"{len(reports)} report(s) on a healthy run")
        else:
            named = [r for r in slow if ADDR[1] in r["subject"]["address"]
                     and ADDR[2] in r["peer"]["address"]]
            if not named:
                failures.append("the throttled link rank 1 -> rank 2 was not named")
            else:
                first = named[0]
                after_s = (first["wall_ns"] - t0_wall) / 1e9
                if after_s > BOUND_S:
                    failures.append(f"named after {after_s:.1f} s > {BOUND_S} s")
                if first["subject"]["pid"] == 0 or first["peer"]["pid"] == 0:
                    failures.append("the report does not name both processes")
                if first["subject"]["rank"] != 1 or first["peer"]["rank"] != 2:
                    failures.append(f"the report names ranks {first['subject']['rank']} -> "
                                    f"{first['peer']['rank']}, not 1 -> 2")
            others = [r for r in reports if r not in named]
            if others:
                failures.append(f"{len(others)} other report(s): " +
                                "; ".join(r["text"] for r in others))
        # Each link's lowest and highest ratio to its peers over the run (the
        # margin the threshold has).
        ratios = {}
        for j in standings:
            for l in j["standings"]["links"]:
                if l["ratio"] > 0:
                    key = f"{l['from']['rank']}->{l['to']['rank']}"
                    lo, hi = ratios.get(key, (l["ratio"], l["ratio"]))
                    ratios[key] = (min(lo, l["ratio"]), max(hi, l["ratio"]))
        for key, (lo, hi) in sorted(ratios.items()):
            print(f"link {key}: ratio to its peers {lo:.2f} .. {hi:.2f}")
        summary = {"healthy": args.healthy, "ratios": ratios, "mbit": mbit, "base_mbit": base, "iters": iters,
                   "rounds": rounds,
                   "reports": reports, "t0_wall_ns": t0_wall, "failures": failures}
        if args.json:
            with open(args.json, "w") as f:
                json.dump(summary, f, indent=2)
        if failures:
            for j in standings[-3:]:  # what the watcher saw last
                print(json.dumps(j["standings"]))
            sys.exit("FAIL: " + "; ".join(failures))
        print(("healthy run: no report in " if args.healthy else
               f"HTB at {mbit} Mbit/s on rank 1: named, no fault, in ") +
              f"{args.seconds:.0f} s")


if __name__ == "__main__":
    main()
