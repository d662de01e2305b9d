"""Prometheus text exposition, written to a file or served at /metrics."""

import http.server
import time

from .values import PROGRAM, comm_hex, number, peer_name, rank_label
from .inputs import InputError
from .findings import all_reports, comm_label, end_label, end_of, parse_comm_id, report_ranks


def prom_escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def prom_help(text):
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def prom_number(v):
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, int):
        return str(v)
    return repr(float(v))


class Families:
    """Metric families in the order first declared; samples with equal labels add up."""

    def __init__(self):
        self.families = {}

    def add(self, name, kind, help_, labels, value):
        fam = self.families.setdefault(name, {"kind": kind, "help": help_, "samples": {}})
        key = tuple(sorted(labels.items()))
        fam["samples"][key] = fam["samples"].get(key, 0) + value

    def set(self, name, kind, help_, labels, value):
        """A gauge's value (not added up: a ratio of two samples is no sum)."""
        fam = self.families.setdefault(name, {"kind": kind, "help": help_, "samples": {}})
        fam["samples"][tuple(sorted(labels.items()))] = value

    def declare(self, name, kind, help_):
        self.families.setdefault(name, {"kind": kind, "help": help_, "samples": {}})

    def text(self):
        out = []
        for name, fam in self.families.items():
            out.append(f"# HELP {name} {prom_help(fam['help'])}")
            out.append(f"# TYPE {name} {fam['kind']}")
            sample_name = name
            for key, value in fam["samples"].items():
                labels = ",".join(f'{k}="{prom_escape(v)}"' for k, v in key)
                out.append(f"{sample_name}{{{labels}}} {prom_number(value)}" if labels
                           else f"{sample_name} {prom_number(value)}")
        return "\n".join(out) + "\n"


def prometheus_text(job):
    m = Families()
    P = "nccl_resilient_"
    m.declare(P + "process_alive", "gauge",
              "1 while the rank's process runs (as its blackbox snapshot says), else 0.")
    m.declare(P + "connection_bytes_total", "counter",
              "Bytes the net plugin completed on the connections to a peer.")
    m.declare(P + "connection_requests_total", "counter",
              "Requests the net plugin completed on the connections to a peer.")
    m.declare(P + "connection_outstanding_requests", "gauge",
              "Requests posted to a peer and not completed at the snapshot.")
    m.declare(P + "connection_outstanding_bytes", "gauge",
              "Bytes of the requests posted to a peer and not completed at the snapshot.")
    m.declare(P + "faults_total", "counter",
              "Faults the rank's plugins recorded, by fault class (the blackbox's fault ring).")
    m.declare(P + "operations_completed_total", "counter",
              "NCCL operations completed on a communicator (profiler), by kind.")
    m.declare(P + "operations_in_flight", "gauge",
              "NCCL operations enqueued and not completed on a communicator at the snapshot.")
    for proc in job.ordered():
        r = rank_label(proc)
        s = proc.snapshot
        if s is not None:
            # A post-mortem dump says the process ended, whatever its last snapshot said.
            alive = bool(s.get("process_alive")) and proc.post_mortem is None
            m.add(P + "process_alive", "gauge", "", {"rank": r, "host": proc.host or "",
                                                     "pid": str(proc.pid)}, 1 if alive else 0)
            if s.get("heartbeat_wall_ns"):
                m.add(P + "heartbeat_timestamp_seconds", "gauge",
                      "Wall-clock time of the rank's last plugin heartbeat.", {"rank": r},
                      s["heartbeat_wall_ns"] / 1e9)
            m.add(P + "faults_recorded_total", "counter",
                  "Faults and reports the rank's plugins numbered (the ring keeps the last ones).",
                  {"rank": r}, s.get("fault_count") or 0)
        for c in proc.connections():
            lab = {"rank": r, "peer": peer_name(job, c), "direction": c.get("direction", "?"),
                   "comm": comm_hex(c)}
            m.add(P + "connection_bytes_total", "counter", "", lab, c.get("completed_bytes") or 0)
            m.add(P + "connection_requests_total", "counter", "", lab,
                  c.get("completed_requests") or 0)
            m.add(P + "connection_outstanding_requests", "gauge", "", lab,
                  c.get("outstanding_requests") or 0)
            m.add(P + "connection_outstanding_bytes", "gauge", "", lab,
                  c.get("outstanding_bytes") or 0)
            if c.get("busy_ns") is not None:
                m.add(P + "connection_busy_seconds_total", "counter",
                      "Time requests to the peer were outstanding, as the watchdog samples it.",
                      lab, c["busy_ns"] / 1e9)
            if c.get("rtt_ns"):
                m.add(P + "connection_rtt_seconds", "gauge",
                      "The last liveness heartbeat round trip to the peer process.", lab,
                      c["rtt_ns"] / 1e9)
        for f in proc.real_faults():
            m.add(P + "faults_total", "counter", "", {"rank": r, "class": f.get("class", "?")}, 1)
        for c in proc.communicators():
            lab = {"rank": r, "comm": comm_hex(c)}
            m.add(P + "operations_completed_total", "counter", "", dict(lab, kind="collective"),
                  c.get("coll_completed") or 0)
            m.add(P + "operations_completed_total", "counter", "", dict(lab, kind="p2p"),
                  c.get("p2p_completed") or 0)
            m.add(P + "operations_in_flight", "gauge", "", lab, c.get("in_flight") or 0)
            m.add(P + "communicator_dropped_events_total", "counter",
                  "Profiler events the plugin could not track on the communicator.", lab,
                  c.get("dropped_events") or 0)
        if proc.timeline:
            iterations = max(e.get("iteration", 0) for e in proc.timeline)
            m.add(P + "restarts_total", "counter",
                  "Restarts of the job the rank took part in (its last iteration).",
                  {"rank": r}, iterations)
        if proc.outcome:
            m.add(P + "rank_outcome", "gauge",
                  "1 for how the rank's restart loop ended (rank report).",
                  {"rank": r, "outcome": proc.outcome}, 1)
        if proc.post_mortem:
            m.add(P + "rank_ended", "gauge",
                  "1 for a rank whose monitor recorded its end (post-mortem dump), by reason.",
                  {"rank": r, "reason": proc.post_mortem.get("reason", "")}, 1)
    reports = all_reports(job)
    for rep in reports:
        kind = rep["kind"]
        for rk in report_ranks(job, rep) or ["?"]:
            lab = {"kind": kind, "rank": str(rk)}
            m.add(P + "reports_total", "counter",
                  "Slow-link, straggler and stuck-rank reports about a rank (the subject), by "
                  "kind.", lab, rep["_times"])
            if isinstance(rep.get("score"), (int, float)):
                m.set(P + "report_score", "gauge",
                      "The score a report gives a rank (as the report states it).", lab,
                      rep["score"])
            if kind == "slow link" and number(rep.get("ratio")):  # 0: no peer measured
                m.set(P + "slow_link_ratio", "gauge",
                      "A reported slow link's busy throughput over its reference (the "
                      "median of the other links, or its own best window), when reported.",
                      {"rank": str(rk), "peer": end_label(job, rep.get("peer"))}, rep["ratio"])
            if kind == "stuck rank":
                stuck_rank_metrics(m, P, rep, str(rk))
    standings_metrics(job, m, P, reports)
    m.add(P + "report_generated_timestamp_seconds", "gauge",
          "When resilient-report read the records.", {}, time.time())
    return m.text()


def stuck_rank_metrics(m, P, rep, rank):
    """A stuck rank: counted per subject rank and communicator; how long the others had
    waited in the collective it did not enter, when reported."""
    comm = comm_label(rep["comm_id"])
    m.add(P + "stuck_rank_reports_total", "counter",
          "Stuck-rank reports about a rank (the subject: alive, inside no collective, but "
          "not entering one the other ranks of the communicator waited in past "
          "NCCL_RESILIENT_STUCK_RANK_TIMEOUT_MS), by communicator; one per collective.",
          {"rank": rank, "comm": comm}, 1)
    if number(rep.get("waited_ns")) is not None:
        coll = rep.get("coll_index")
        m.set(P + "stuck_rank_waited_seconds", "gauge",
              "How long the other ranks of the communicator had waited in the collective a "
              "stuck rank had not entered, when it was reported (by collective index and "
              "function).",
              {"rank": rank, "comm": comm,
               "collective": str(coll) if number(coll) is not None else "?",
               "function": rep.get("function") or "?"}, rep["waited_ns"] / 1e9)


def standings_metrics(job, m, P, reports):
    """The last round of resilient-inspect --job --json: every link's busy throughput,
    busy share and ratio, every rank's lateness. Without one, the straggler gauges come
    from the reports (their values when reported)."""
    st = job.standings
    if st is not None:
        m.add(P + "standings_timestamp_seconds", "gauge",
              "When resilient-inspect --job computed the last standings round read.", {},
              st["wall_ns"] / 1e9)
        if isinstance(st.get("processes"), int):
            m.add(P + "standings_processes", "gauge",
                  "Processes the last standings round of resilient-inspect --job read.", {},
                  st["processes"])
        for link in st["links"]:
            frm, to = end_of(link.get("from")) or {}, end_of(link.get("to")) or {}
            lab = {"comm": comm_label(parse_comm_id(link.get("comm_id"))),
                   "from_rank": end_label(job, frm), "to_rank": end_label(job, to),
                   "from_address": frm.get("address", ""), "to_address": to.get("address", "")}
            if number(link.get("bytes_per_s")):  # 0: not measured
                m.set(P + "link_busy_throughput_bytes_per_second", "gauge",
                      "A sending link's bytes over the time it was busy in the last window "
                      "(resilient-inspect --job, last round).", lab, link["bytes_per_s"])
            if number(link.get("busy_fraction")) is not None:
                m.set(P + "link_busy_ratio", "gauge",
                      "The fraction of the last window a sending link was busy "
                      "(resilient-inspect --job, last round).", lab, link["busy_fraction"])
            if number(link.get("ratio")):  # 0: not compared
                m.set(P + "link_peer_ratio", "gauge",
                      "A link's busy throughput over the median of the job's other sending "
                      "links (over its own best window when that is the lower one; "
                      "resilient-inspect --job, last round).", lab, link["ratio"])
            if isinstance(link.get("slow"), bool):
                m.set(P + "link_slow", "gauge",
                      "1 while a link is below the slow-link threshold (resilient-inspect "
                      "--job, last round).", lab, link["slow"])
        for rank in st["ranks"]:
            who = end_of(rank.get("rank")) or {}
            lab = {"comm": comm_label(parse_comm_id(rank.get("comm_id"))),
                   "rank": end_label(job, who)}
            n, last = number(rank.get("collectives")), number(rank.get("last_count"))
            waited = number(rank.get("waited"))
            score = number(rank.get("score"))
            if score is None and (waited or n):
                score = (last or 0) / (waited or n)
            if score is not None:
                m.set(P + "straggler_score", "gauge",
                      "The standings' score of a rank: of the window's collectives that waited "
                      "for their last rank (all of them, before waiting was counted), the "
                      "share it was last to (resilient-inspect --job, last round).", lab, score)
            if waited is not None:
                m.set(P + "straggler_waited_collectives", "gauge",
                      "Collectives of the window that waited for their last rank by the "
                      "straggler threshold or more (resilient-inspect --job, last round).", lab,
                      waited)
            straggler_gauges(m, P, lab, rank.get("lag_ns"), n, rank.get("straggler"))
        return
    for rep in reports:
        if rep["kind"] != "straggler":
            continue
        for rk in report_ranks(job, rep):
            lab = {"comm": comm_label(rep["comm_id"]), "rank": str(rk)}
            straggler_gauges(m, P, lab, rep.get("lag_ns"), number(rep.get("collectives")),
                             None)


def straggler_gauges(m, P, lab, lag_ns, collectives, straggler):
    if number(lag_ns) is not None:
        m.set(P + "straggler_lag_seconds", "gauge",
              "A rank's median lag behind the median rank at the collectives it was last to "
              "(the last standings round; without one, the straggler report's).", lab,
              lag_ns / 1e9)
    if collectives is not None:
        m.set(P + "straggler_collectives", "gauge",
              "Collectives of the communicator compared over the window (the last standings "
              "round; without one, the straggler report's).", lab, collectives)
    if isinstance(straggler, bool):
        m.set(P + "rank_straggling", "gauge",
              "1 while a rank meets the straggler thresholds (resilient-inspect --job, last "
              "round).", lab, straggler)


def serve_metrics(port, load):
    """http://127.0.0.1:PORT/metrics, the inputs read again at each scrape."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path.split("?")[0] != "/metrics":
                self.send_error(404, "only /metrics is served")
                return
            try:
                body = prometheus_text(load()).encode()
                code = 200
            except (InputError, OSError) as e:
                body = f"# {PROGRAM}: {e}\n".encode()
                code = 500
            self.send_response(code)
            self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, fmt, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    print(f"{PROGRAM}: serving http://127.0.0.1:{server.server_address[1]}/metrics", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()
