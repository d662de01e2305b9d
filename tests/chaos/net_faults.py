#!/usr/bin/env python3
"""Network faults through the resilient plugin, between two network namespaces.

Two ranks of resilient-nettest, each in a namespace of its own joined by a
veth pair (10.231.77.1 <-> 10.231.77.2), run a ring all-reduce. Then:

  linkdown  `ip link set down` on rank 0's end: both ranks must report a fault
            within the liveness timeout + a margin, each naming the other, and
            each attributing it to the link (its own interface is down or has
            lost its carrier), not to the peer process.
  drop      an nftables rule in rank 0's namespace drops every packet to and
            from rank 1 (a blackhole: no error, no reset): both ranks report the
            peer unresponsive within the same bound, naming each other.
  slow      HTB limits both ends to 10% of the bandwidth measured on the same
            link just before: the run must finish with no fault and no data
            error, take several liveness timeouts, and actually be slowed.

Needs root and `ip netns` (and nft for `drop`, HTB for `slow`); exits 77
(skipped) without them. Only addresses inside the namespaces it creates are
touched; the namespaces are removed at the end whatever happens.

usage: net_faults.py NETTEST PLUGIN linkdown|drop|slow [--json FILE]
(--json: the detection times per rank, for scripts/bench_detection.py)
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
LIVENESS_MS = 1000  # the default NCCL_RESILIENT_LIVENESS_TIMEOUT_MS
ADDR = ("10.231.77.1", "10.231.77.2")
SIZE = 1 << 20


def sh(*args, check=True):
    return subprocess.run(list(args), capture_output=True, text=True, check=check)


class Namespaces:
    """Two namespaces joined by a veth pair; removed on exit."""

    def __init__(self):
        tag = f"{os.getpid() % 100000}"
        self.ns = (f"rchaos{tag}a", f"rchaos{tag}b")
        self.dev = (f"rc{tag}a", f"rc{tag}b")

    def __enter__(self):
        try:
            for ns in self.ns:
                sh("ip", "netns", "add", ns)
            sh("ip", "link", "add", self.dev[0], "netns", self.ns[0], "type", "veth", "peer",
               "name", self.dev[1], "netns", self.ns[1])
            for i in range(2):
                self.ip(i, "addr", "add", f"{ADDR[i]}/24", "dev", self.dev[i])
                self.ip(i, "link", "set", self.dev[i], "up")
                self.ip(i, "link", "set", "lo", "up")
        except subprocess.CalledProcessError as e:
            self.__exit__()
            print(f"SKIP: cannot build the namespaces: {e.stderr.strip()}")
            sys.exit(SKIP)
        return self

    def __exit__(self, *exc):
        for ns in self.ns:
            sh("ip", "netns", "del", ns, check=False)

    def ip(self, i, *args):
        return sh("ip", "-n", self.ns[i], *args)

    def run(self, i, *args, check=True):
        return sh("ip", "netns", "exec", self.ns[i], *args, check=check)

    def start_rank(self, rank, cmd, port):
        env = dict(os.environ, RANK=str(rank), WORLD_SIZE="2", MASTER_ADDR=ADDR[0],
                   MASTER_PORT=str(port), NCCL_RESILIENT_SOCKET_IFNAME=f"={self.dev[rank]}")
        return subprocess.Popen(["ip", "netns", "exec", self.ns[rank]] + cmd, env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def nettest_cmd(nettest, plugin, *extra):
    return [nettest, "--plugin", plugin, "--pattern", "allreduce", "-b", str(SIZE), "-e",
            str(SIZE), "-w", "1", "--timeout", "20", *extra]


def collect(procs, timeout):
    """Waits for every rank; returns their (stdout, stderr, returncode)."""
    outs = [None] * len(procs)

    def wait(i):
        try:
            o, e = procs[i].communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            procs[i].kill()
            o, e = procs[i].communicate()
            e += f"\n(killed: still running after {timeout} s)"
        outs[i] = (o, e, procs[i].returncode)

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(len(procs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return outs


def baseline_busbw(ns, nettest, plugin, tmp):
    """Bus bandwidth of the unthrottled link (GB/s), measured on the same path."""
    out = os.path.join(tmp, "baseline.json")
    procs = [ns.start_rank(r, nettest_cmd(nettest, plugin, "-n", "40", "--json", out), 29400)
             for r in range(2)]
    results = collect(procs, 120)
    if any(rc != 0 for _, _, rc in results):
        sys.exit(f"FAIL: the unthrottled baseline run failed: {results}")
    with open(out) as f:
        return json.load(f)["results"][0]["busbw_gbps"]


def throttle(ns, dev_index, mbit):
    """HTB on namespace `dev_index`'s interface (any object with .dev and .run(i, ...))."""
    dev = ns.dev[dev_index]
    try:
        ns.run(dev_index, "tc", "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb",
               "default", "1")
        ns.run(dev_index, "tc", "class", "add", "dev", dev, "parent", "1:", "classid", "1:1",
               "htb", "rate", f"{mbit}mbit", "burst", "256k")
    except subprocess.CalledProcessError as e:
        print(f"SKIP: HTB is not available: {e.stderr.strip()}")
        sys.exit(SKIP)


def run_slow(ns, nettest, plugin, tmp):
    base = baseline_busbw(ns, nettest, plugin, tmp)
    mbit = max(8, int(base * 8000 * 0.10))  # 10% of the measured bandwidth
    for i in range(2):
        throttle(ns, i, mbit)
    # Enough iterations for about 3 liveness timeouts at the throttled rate.
    seconds = 3 * LIVENESS_MS / 1000
    iters = max(20, int(seconds * mbit * 1e6 / 8 / SIZE))
    out = os.path.join(tmp, "slow.json")
    t0 = time.monotonic()
    procs = [ns.start_rank(r, nettest_cmd(nettest, plugin, "-n", str(iters), "--json", out),
                           29500) for r in range(2)]
    results = collect(procs, 300)
    elapsed = time.monotonic() - t0
    for r, (o, e, rc) in enumerate(results):
        if rc != 0:
            print(o[-3000:], e[-3000:])
            sys.exit(f"FAIL: rank {r} of the throttled run exited {rc} (a fault or data error)")
    with open(out) as f:
        report = json.load(f)
    slowed = report["results"][0]["busbw_gbps"]
    print(f"baseline {base:.3f} GB/s; HTB at {mbit} Mbit/s; throttled run: {iters} iterations in "
          f"{elapsed:.1f} s at {slowed:.3f} GB/s ({100 * slowed / base:.1f}% of baseline), "
          f"errors {report['errors']}, no fault")
    if report["errors"] != 0:
        sys.exit("FAIL: data errors under the rate limit")
    if slowed > 0.2 * base:
        sys.exit("FAIL: the rate limit did not slow the link down (the test proves nothing)")
    if elapsed < 2 * LIVENESS_MS / 1000:
        sys.exit(f"FAIL: the throttled run lasted only {elapsed:.1f} s, less than two liveness "
                 "timeouts")


def inject(ns, fault):
    if fault == "linkdown":
        ns.ip(0, "link", "set", ns.dev[0], "down")
        return
    rules = ("add table inet rchaos\n"
             "add chain inet rchaos in { type filter hook input priority 0; policy accept; }\n"
             "add chain inet rchaos out { type filter hook output priority 0; policy accept; }\n"
             f"add rule inet rchaos in ip saddr {ADDR[1]} drop\n"
             f"add rule inet rchaos out ip daddr {ADDR[1]} drop\n")
    subprocess.run(["ip", "netns", "exec", ns.ns[0], "nft", "-f", "-"], input=rules, text=True,
                   capture_output=True, check=True)


def run_cut(ns, nettest, plugin, fault, tmp, json_out):
    window_ms = 20000
    outs = [os.path.join(tmp, f"rank{r}.json") for r in range(2)]
    procs = [ns.start_rank(r, nettest_cmd(nettest, plugin, "-n", "100000000", "--fault-window",
                                          str(window_ms), "--json", outs[r]), 29500)
             for r in range(2)]
    # Rank 0 announces fault mode once every rank is connected and measuring.
    line = procs[0].stdout.readline()
    deadline = time.monotonic() + 60
    while line and "# fault mode" not in line and time.monotonic() < deadline:
        line = procs[0].stdout.readline()
    if "# fault mode" not in line:
        for p in procs:
            p.kill()
        sys.exit(f"FAIL: the ranks did not start: {collect(procs, 10)}")
    time.sleep(0.5)  # let traffic flow: the fault hits a busy link
    t0 = time.monotonic_ns()
    inject(ns, fault)
    results = collect(procs, 60)
    bound_ms = LIVENESS_MS + 1000  # the bound is the feature; +1 s for a loaded CI machine
    failures = []
    detections = []
    for r in range(2):
        try:
            with open(outs[r]) as f:
                result = json.load(f)
        except OSError:
            print(results[r][0][-3000:], results[r][1][-3000:])
            failures.append(f"rank {r}: no result (exit {results[r][2]})")
            continue
        fault_json = result.get("fault")
        if not fault_json:
            failures.append(f"rank {r}: no fault detected (window expired: "
                            f"{result.get('window_expired')})")
            continue
        ms = (fault_json["detected_ns"] - t0) / 1e6
        warning = fault_json.get("plugin_warning") or fault_json.get("status", "")
        print(f"rank {r}: detected after {ms:.0f} ms, peer {fault_json.get('peer')}: {warning}")
        detections.append({"rank": r, "ms": ms, "peer": fault_json.get("peer"), "warning": warning})
        other = 1 - r
        if ms > bound_ms:
            failures.append(f"rank {r}: detected after {ms:.0f} ms > {bound_ms} ms")
        if fault_json.get("timed_out"):
            failures.append(f"rank {r}: the host engine's own timeout fired, not the plugin")
        if fault_json.get("peer") != other:
            failures.append(f"rank {r} blamed rank {fault_json.get('peer')}, not {other}")
        if ADDR[other] not in warning:
            failures.append(f"rank {r}: the plugin's warning does not name {ADDR[other]}")
        # A cut link is seen from both ends as the link's fault (each end's
        # interface is down or without carrier); a blackhole only as silence.
        expected = "link down" if fault == "linkdown" else "peer unresponsive"
        if expected not in warning:
            failures.append(f"rank {r}: the warning does not say '{expected}'")
    if json_out:
        with open(json_out, "w") as f:
            json.dump({"fault": fault, "ranks": detections, "failures": failures}, f, indent=2)
    if failures:
        sys.exit("FAIL: " + "; ".join(failures))
    print(f"{fault}: both ranks detected the fault within {bound_ms} ms and named each other")


def main():
    nettest, plugin, fault = sys.argv[1], sys.argv[2], sys.argv[3]
    json_out = sys.argv[5] if len(sys.argv) == 6 and sys.argv[4] == "--json" else None
    if fault not in ("linkdown", "drop", "slow"):
        sys.exit(f"unknown fault {fault}")
    if os.geteuid() != 0 or shutil.which("ip") is None:
        print("SKIP: needs root and iproute2")
        sys.exit(SKIP)
    if fault == "drop" and shutil.which("nft") is None:
        print("SKIP: needs nft (nftables)")
        sys.exit(SKIP)
    if fault == "slow" and shutil.which("tc") is None:
        print("SKIP: needs tc (iproute2)")
        sys.exit(SKIP)
    with Namespaces() as ns, tempfile.TemporaryDirectory() as tmp:
        if fault == "slow":
            run_slow(ns, nettest, plugin, tmp)
        else:
            run_cut(ns, nettest, plugin, fault, tmp, json_out)


if __name__ == "__main__":
    main()
