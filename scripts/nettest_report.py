"""Runs resilient-nettest once on loopback and returns its JSON report.

Shared by the net plugin's benchmark scripts (bench_overhead.py,
bench_net_layer.py).
"""
import json
import os
import subprocess
import tempfile


def run_nettest(cmd, what, env=None):
    """Runs `cmd` (a resilient-nettest command line, without --json) in `env`
    (default: ours) with the ranks on `lo` unless NCCL_RESILIENT_SOCKET_IFNAME
    says otherwise; returns the report, or raises naming `what` when a rank
    saw errors or faults."""
    env = dict(os.environ if env is None else env)
    env.setdefault("NCCL_RESILIENT_SOCKET_IFNAME", "lo")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "report.json")
        subprocess.run(cmd + ["--json", path], env=env, capture_output=True, text=True,
                       timeout=3600, check=True)
        with open(path) as f:
            report = json.load(f)
    if not report["ok"] or report["errors"] != 0:
        raise RuntimeError(f"{what}: errors or faults: {report}")
    return report
