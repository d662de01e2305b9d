#!/usr/bin/env python3
"""One test of the thirdparty suite: a partner (a third-party NCCL net plugin,
built from its archive by build_partner.sh) under resilient-nettest, loaded
directly or wrapped by the resilient plugin (--wrap: NCCL_RESILIENT_INNER is
the partner). The partner is built first unless it is already (cached); one
that cannot be built here (no archive, no build dependency) skips (77).

  allreduce RANKS        ring all-reduce on RANKS ranks, every power of two from
                         8 B to 64 MiB, every byte checked
  fault SCRIPT kill|stop 4 ranks, one killed or frozen: SCRIPT (tests/chaos/
                         process_faults.py) checks that every survivor reports
                         it within its bound and that the victim is blamed
  no-devices             the partner loads, inits and reports 0 devices:
                         resilient-nettest says so and every rank exits (no
                         signal, no hang)
  properties NETPROPS    (--wrap) NETPROPS (resilient-netprops) lists the
                         partner as NCCL sees it, directly and wrapped, at
                         every ABI version the partner exports: the optional
                         members set after init and every field of every
                         device's properties must be equal (issue 33)

In allreduce and no-devices every rank must log that it loaded the partner's
library (directly, or as the resilient plugin's inner transport).

With --abi N the library must have been loaded through ncclNetPlugin_vN.

usage: partner_test.py --build SCRIPT NAME ARCHIVE WORKDIR NETTEST [--wrap PLUGIN] [--abi N]
                       CHECK [ARGS...]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

SKIP = 77
NO_DEVICES = re.compile(r"^# rank (\d+): exit \d+: .*device 0 requested, the plugin has 0\b", re.M)
RANK_END = re.compile(r"^# rank (\d+): (\S+ ?\S*)", re.M)
LOADED = re.compile(r"\[(\d+)\] .*inner transport: net plugin .* \((ncclNetPlugin_v\d+)\) from (\S+)$",
                    re.M)


def build_partner(script, name, archive, workdir):
    """The partner's library; exits 77 or 1 when it cannot be built."""
    proc = subprocess.run([script, name, archive, workdir], capture_output=True, text=True)
    print(proc.stdout + proc.stderr, end="")
    if proc.returncode == SKIP:
        sys.exit(SKIP)
    if proc.returncode != 0:
        sys.exit(f"FAIL: build_partner.sh {name} exited {proc.returncode}")
    with open(os.path.join(workdir, "library")) as f:
        return f.read().strip()


def run_nettest(cmd, env, limit_s):
    """resilient-nettest's result; a run past limit_s is a hang, a failure."""
    print("$ " + " ".join(cmd), flush=True)
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=limit_s)
    except subprocess.TimeoutExpired:
        sys.exit(f"FAIL: resilient-nettest still running after {limit_s} s (a hang)")
    print(proc.stdout[-6000:])
    return proc


def check_loaded(proc, library, ranks, abi):
    """Each of `ranks` logged (NCCL_DEBUG=INFO, INIT) that it loaded `library`,
    through ncclNetPlugin_v<abi> (the newest the partner exports)."""
    want = os.path.realpath(library)
    found = [(int(r), symbol) for r, symbol, path in LOADED.findall(proc.stderr)
             if os.path.realpath(path) == want]
    loaded = {r for r, _ in found}
    if not set(ranks) <= loaded:
        print(proc.stderr[-6000:])
        sys.exit(f"FAIL: ranks {sorted(ranks)} should have loaded {want}; {sorted(loaded)} did")
    symbols = {symbol for _, symbol in found}
    if abi and symbols != {f"ncclNetPlugin_v{abi}"}:
        sys.exit(f"FAIL: {want} should have been loaded through ncclNetPlugin_v{abi}, "
                 f"not {sorted(symbols)}")


def allreduce(nettest, plugin, library, env, ranks, abi):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        proc = run_nettest([nettest, "--plugin", plugin, "--ranks", str(ranks),
                            "--pattern", "allreduce", "-b", "8", "-e", "64M", "-f", "2",
                            "-n", "2", "-w", "1", "--timeout", "60", "--json", out], env, 300)
        if proc.returncode != 0:
            print(proc.stderr[-6000:])
            sys.exit(f"FAIL: resilient-nettest exited {proc.returncode}")
        result = json.load(open(out))
    sizes = [r["bytes"] for r in result["results"]]
    if not result["ok"] or result["errors"] != 0 or sizes[-1] != 64 << 20 or len(sizes) != 24:
        sys.exit(f"FAIL: ok {result['ok']}, {result['errors']} wrong values, sizes {sizes}")
    check_loaded(proc, library, range(ranks), abi)
    print(f"allreduce on {ranks} ranks through {library} (ncclNetPlugin_v{abi}): 8 B .. 64 MiB, "
          "every byte right")


def no_devices(nettest, plugin, library, env, abi):
    ranks = 2
    proc = run_nettest([nettest, "--plugin", plugin, "--ranks", str(ranks), "-b", "8", "-e", "8",
                        "-n", "1", "-w", "0", "--timeout", "5"], env, 60)
    ends = {int(r): how for r, how in RANK_END.findall(proc.stdout)}
    exits = {r for r, how in ends.items() if how.startswith("exit")}
    if proc.returncode <= 0 or exits != set(range(ranks)):
        print(proc.stderr[-6000:])
        sys.exit(f"FAIL: resilient-nettest exited {proc.returncode}; ranks: {ends}")
    told = {int(r) for r in NO_DEVICES.findall(proc.stdout)}
    if not told:
        print(proc.stderr[-6000:])
        sys.exit("FAIL: no rank said that the plugin has 0 devices")
    # A rank that reached the plugin after rank 0 had given up and left finds
    # the rendezvous closed and gives up too, at --timeout: it never loads it.
    check_loaded(proc, library, told, abi)
    print(f"{library} loaded, initialised and reported 0 devices on ranks {sorted(told)}; "
          f"resilient-nettest exited {proc.returncode} with that message")


def properties(netprops, plugin, library, env):
    """The partner's listing equals the wrapped one, version by version, but
    for the table's own name."""
    def listing(lib, run_env, version):
        proc = subprocess.run([netprops, lib, "--abi", str(version)], env=run_env,
                              capture_output=True, text=True, timeout=120)
        if proc.returncode not in (0, 1):
            sys.exit(f"FAIL: resilient-netprops {lib} exited {proc.returncode}: {proc.stderr}")
        return json.loads(proc.stdout)

    direct_env = {k: v for k, v in env.items() if k != "NCCL_RESILIENT_INNER"}
    compared = []
    for version in range(12, 5, -1):
        symbol = f"ncclNetPlugin_v{version}"
        # One process per listing: each library is initialised as a fresh
        # NCCL process would initialise it.
        direct = listing(library, direct_env, version).get(symbol)
        if direct is None:
            continue
        wrapped = listing(plugin, env, version).get(symbol)
        if wrapped is None:
            sys.exit(f"FAIL: {plugin} does not export {symbol}")
        if direct.get("init") != 0 or not direct.get("properties"):
            sys.exit(f"FAIL: {symbol} of {library} did not initialise with devices: {direct}")
        direct.pop("table")
        wrapped.pop("table")
        if direct != wrapped:
            print(json.dumps({"direct": direct, "wrapped": wrapped}, indent=1, sort_keys=True))
            sys.exit(f"FAIL: {symbol}: the wrapped listing differs from the partner's")
        compared.append(f"{symbol} ({len(direct['properties'])} devices, optional members "
                        f"{sorted(k for k, v in direct['optional'].items() if v)})")
    if not compared:
        sys.exit(f"FAIL: {library} exports no ncclNetPlugin_v6..v12")
    print("equal, field by field, directly and wrapped: " + "; ".join(compared))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", nargs=4, required=True, metavar=("SCRIPT", "NAME", "ARCHIVE", "DIR"))
    ap.add_argument("nettest")
    ap.add_argument("--wrap", metavar="PLUGIN", help="the resilient plugin, wrapping the partner")
    ap.add_argument("--abi", type=int, default=0,
                    help="the ABI version the partner must be loaded through (0: any)")
    ap.add_argument("check", choices=["allreduce", "fault", "no-devices", "properties"])
    ap.add_argument("args", nargs="*")
    a = ap.parse_args()

    library = build_partner(*a.build)
    env = dict(os.environ)
    plugin = library
    if a.wrap:
        env["NCCL_RESILIENT_INNER"] = library
        plugin = a.wrap
    if a.check == "fault":
        if not a.wrap:
            sys.exit("fault: only wrapped (--wrap): the resilient plugin is what detects")
        script, fault = a.args
        sys.exit(subprocess.run([sys.executable, script, a.nettest, plugin, fault], env=env).returncode)
    if a.check == "properties":
        if not a.wrap:
            sys.exit("properties: only wrapped (--wrap): the listing is compared with the partner's")
        properties(a.args[0], plugin, library, env)
        return
    # The INIT log names the library each rank loaded.
    env.update(NCCL_DEBUG="INFO", NCCL_DEBUG_SUBSYS="INIT")
    if a.check == "allreduce":
        allreduce(a.nettest, plugin, library, env, int(a.args[0]), a.abi)
    else:
        no_devices(a.nettest, plugin, library, env, a.abi)


if __name__ == "__main__":
    main()
