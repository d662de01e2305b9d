"""Summary and command line."""

import argparse
import json
import sys

from .values import PROGRAM, iso
from .output import write_atomically
from .inputs import INSPECT, InputError, find_inspect, load_job
from .timeline import fault_rows, restarts
from .findings import all_reports, comm_label, report_measure, report_who
from .chrome_trace import chrome_trace
from .flight_recorder import FR_PREFIX, FR_VERSION, write_fr_dumps
from .prometheus import prometheus_text, serve_metrics
from .html_page import html_page


def summary_text(job):
    lines = [f"job {job.name}: {len(job.processes)} processes"]
    for p in job.ordered():
        what = p.outcome or (("ended: " + p.post_mortem.get("reason", "")) if p.post_mortem
                             else "-")
        lines.append(f"  {p.label:10} pid {p.pid if p.pid > 0 else '?':<8} {what:22} "
                     f"faults {len(p.real_faults()):<3} communicators {len(p.communicators())}")
    for w, p, src, cls, text in fault_rows(job):
        lines.append(f"  fault {iso(w)} {p.label}: {cls}: {text[:140]}")
    for r in restarts(job):
        lines.append(f"  restart -> iteration {r['iteration']} at {iso(r['wall_ns'])}"
                     + (f", culprits {r['culprits']}" if r["culprits"] else ""))
    for r in all_reports(job):
        comm = f" on communicator {comm_label(r['comm_id'])}" if r["comm_id"] is not None else ""
        lines.append(f"  report {iso(r.get('wall_ns'))} {r['kind']}: {report_who(job, r)}{comm}: "
                     f"{report_measure(r)}")
    if job.standings is not None:
        st = job.standings
        lines.append(f"  standings at {iso(st['wall_ns'])}: {len(st['links'])} links, "
                     f"{len(st['ranks'])} ranks")
    return "\n".join(lines)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog=PROGRAM,
        description="Turns a job's records (blackbox snapshots or regions, rank timelines, "
                    "post-mortem dumps, resilient-inspect --job --json lines) into a Chrome "
                    "trace, PyTorch flight-recorder dumps, an HTML page and Prometheus metrics "
                    "(docs/observability.md).")
    p.add_argument("inputs", nargs="*",
                   help="files or directories (a directory is scanned, not recursively); "
                        "e.g. the job's blackbox directory and the output of "
                        "resilient-inspect --job --json")
    p.add_argument("--chrome-trace", metavar="FILE", help="write a Trace Event Format JSON file")
    p.add_argument("--fr-dump", metavar="DIR",
                   help="write PyTorch flight-recorder dumps, one file per rank")
    p.add_argument("--fr-prefix", default=FR_PREFIX,
                   help=f"file name prefix of the dumps (default {FR_PREFIX})")
    p.add_argument("--fr-version", default=FR_VERSION,
                   help=f"the dumps' format version (default {FR_VERSION})")
    p.add_argument("--fr-timeout-ms", type=int, default=0,
                   help="timeout_ms of every entry (the records hold none; default 0)")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML page")
    p.add_argument("--prometheus", metavar="FILE",
                   help="write Prometheus text exposition (atomically)")
    p.add_argument("--listen", metavar="PORT", type=int,
                   help="serve the metrics on http://127.0.0.1:PORT/metrics, reading the inputs "
                        "at each scrape")
    p.add_argument("--inspect", metavar="PATH",
                   help=f"the {INSPECT} that reads raw blackbox regions (default: "
                        "$RESILIENT_INSPECT, beside this script, then PATH)")
    p.add_argument("--job", metavar="NAME", help="the job's name (default: the directory's)")
    p.add_argument("-q", "--quiet", action="store_true", help="no notes on stderr")
    return p.parse_args(argv)


def main(argv=None, here=None):
    """here: the directory of the resilient-report script, where resilient-inspect is looked
    for after --inspect and $RESILIENT_INSPECT."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        inspect = find_inspect(args.inspect, here)

        def load():
            return load_job(args.inputs, inspect, args.job)

        job = load()
        wrote = []
        if args.chrome_trace:
            text = json.dumps(chrome_trace(job), separators=(",", ":"))
            write_atomically(args.chrome_trace, text + "\n")
            wrote.append(args.chrome_trace)
        if args.fr_dump:
            wrote += write_fr_dumps(job, args.fr_dump, args.fr_prefix, args.fr_timeout_ms,
                                    args.fr_version)
        if args.html:
            write_atomically(args.html, html_page(job))
            wrote.append(args.html)
        if args.prometheus:
            write_atomically(args.prometheus, prometheus_text(job))
            wrote.append(args.prometheus)
        if not args.quiet:
            for w in job.warnings:
                print(f"{PROGRAM}: note: {w}", file=sys.stderr)
        if not wrote and args.listen is None:
            print(summary_text(job))
        elif not args.quiet and wrote:
            print(f"{PROGRAM}: job {job.name}, {len(job.processes)} processes: wrote "
                  + ", ".join(wrote), file=sys.stderr)
        if args.listen is not None:
            serve_metrics(args.listen, load)
    except InputError as e:
        print(f"{PROGRAM}: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        print(f"{PROGRAM}: {e}", file=sys.stderr)
        return 1
    return 0
