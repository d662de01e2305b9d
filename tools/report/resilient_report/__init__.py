"""resilient-report: a job's records in the formats people already use.

Reads what a job left behind -- blackbox snapshots (`resilient-inspect --json`
output, or raw `resilient-blackbox-<pid>` regions, read through
resilient-inspect), the restart loop's per-rank timelines (the demo's
`rank-<n>.json` or a bare timeline array), the monitor processes'
post-mortem dumps and their logs, the JSON lines of `resilient-inspect --job
--json` (slow-link, straggler and stuck-rank reports, each round's
standings) -- and writes:

  --chrome-trace FILE  one Trace Event Format file (chrome://tracing, Perfetto)
  --fr-dump DIR        PyTorch flight-recorder dumps, one pickle per rank
  --html FILE          one self-contained HTML page: timeline, faults, ranks
  --prometheus FILE    Prometheus text exposition (node-exporter textfile)
  --listen PORT        the same metrics on http://127.0.0.1:PORT/metrics

Without an output option it prints a summary. docs/observability.md says what
each format holds and how the clocks are merged. Python standard library
only.

The package, one module per concept: inputs (what the job left, read into one Job),
timeline (operations, phases, restarts: what the formats share), findings (slow-link,
straggler and stuck-rank reports), values (how ranks, communicators and times are
written), chrome_trace, flight_recorder, prometheus, html_page, output (atomic
writes), cli (summary and command line). tools/report/resilient_report.py runs it.
"""
