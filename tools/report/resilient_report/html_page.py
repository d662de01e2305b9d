"""One self-contained HTML page: an SVG timeline, faults, findings, ranks."""

import html
import time

from .values import PROGRAM, comm_hex, iso, number
from .timeline import fault_rows, op_end_mono, operations, phase_spans, restarts
from .findings import (all_reports, comm_label, end_of, end_process, end_text, parse_comm_id,
    rate_text, report_measure, report_ranks, report_who)

HTML_CSS = """
body{font:13px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:18px;color:#222}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:22px 0 6px}
.meta{color:#555}.warn{color:#8a5a00}
table{border-collapse:collapse;margin:4px 0 10px}
th,td{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f1f1f1}td.n{text-align:right;font-variant-numeric:tabular-nums}
tr:hover td{background:#fafae6}
.legend span{display:inline-block;margin-right:14px}
.sw{display:inline-block;width:12px;height:10px;margin-right:4px;vertical-align:middle}
svg text{font:11px system-ui,sans-serif}
svg .op:hover,svg .ph:hover{stroke:#000;stroke-width:1}
.bad{color:#b00020;font-weight:600}.ok{color:#1b7a1b}
"""


HTML_PHASE_FILL = {"running": "#7cc576", "recovery": "#f0a04b", "setup": "#b8c4d6",
                   "ending": "#9a9a9a", "spare": "#dcdcdc"}


HTML_REPORT_FILL = "#ffb000"


HTML_OP_FILL = {"completed": "#4a7fd0", "hung": "#d0021b", "running": "#e8743b",
                "enqueued": "#f5c342", "abandoned": "#555555"}


def h(text):
    return html.escape(str(text), quote=True)


def nice_step(span_s):
    for step in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 30, 60,
                 120, 300, 600, 1800, 3600):
        if span_s / step <= 12:
            return step
    return 7200


def time_range(job):
    stamps = []
    for proc in job.processes.values():
        stamps += [e["wall_ns"] for e in proc.timeline if e.get("wall_ns")]
        for c, op, _ in operations(proc):
            w = proc.wall(op.get("enqueue_mono_ns"))
            if w:
                stamps.append(w)
                stamps.append(proc.wall(op_end_mono(proc, c, op)[0]))
        for f in proc.real_faults():
            w = f.get("wall_ns") or proc.wall(f.get("mono_ns"))
            if w:
                stamps.append(w)
        if proc.post_mortem_wall_ns:
            stamps.append(proc.post_mortem_wall_ns)
        s = proc.snapshot or {}
        if s.get("heartbeat_wall_ns"):
            stamps.append(s["heartbeat_wall_ns"])
    stamps += [r["wall_ns"] for r in all_reports(job) if r.get("wall_ns")]
    if not stamps:
        return None
    t0, t1 = min(stamps), max(stamps)
    return t0, max(t1, t0 + 1000)


def svg_timeline(job):
    rng = time_range(job)
    procs = job.ordered()
    if rng is None or not procs:
        return "<p>No timed records: nothing to draw.</p>"
    t0, t1 = rng
    left, right, top, row_h = 150, 20, 30, 44
    width = 1320
    plot_w = width - left - right
    height = top + row_h * len(procs) + 30

    def x(wall):
        return left + (wall - t0) / (t1 - t0) * plot_w

    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" role="img" aria-label="job timeline">',
           f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>']
    span_s = (t1 - t0) / 1e9
    step = nice_step(span_s)
    k = 0
    while k * step <= span_s + 1e-9:
        xx = x(t0 + k * step * 1e9)
        out.append(f'<line x1="{xx:.1f}" y1="{top - 6}" x2="{xx:.1f}" y2="{height - 24}" '
                   'stroke="#e4e4e4"/>')
        label = f"{k * step:g} s"
        out.append(f'<text x="{xx:.1f}" y="{height - 10}" text-anchor="middle" fill="#555">'
                   f'{h(label)}</text>')
        k += 1
    for i, proc in enumerate(procs):
        y = top + i * row_h
        fill = "#f7f7f7" if i % 2 == 0 else "#ffffff"
        out.append(f'<rect x="0" y="{y}" width="{width}" height="{row_h}" fill="{fill}"/>')
        out.append(f'<text x="8" y="{y + 17}" fill="#222">{h(proc.label)}</text>')
        sub = f"{proc.host or '?'} pid {proc.pid if proc.pid > 0 else '?'}"
        out.append(f'<text x="8" y="{y + 32}" fill="#777">{h(sub)}</text>')
        for a, b, cat in phase_spans(proc):
            x0, x1 = x(a["wall_ns"]), x(b["wall_ns"])
            title = (f"{proc.label} iteration {a.get('iteration')}: {a.get('phase')} \u2192 "
                     f"{b.get('phase')} ({(b['wall_ns'] - a['wall_ns']) / 1e6:.1f} ms)"
                     + (f"\n{b.get('detail')}" if b.get("detail") else ""))
            out.append(f'<rect class="ph" x="{x0:.1f}" y="{y + 5}" '
                       f'width="{max(0.8, x1 - x0):.1f}" height="14" '
                       f'fill="{HTML_PHASE_FILL[cat]}"><title>{h(title)}</title></rect>')
        s = proc.snapshot or {}
        life_end = proc.post_mortem_wall_ns or s.get("heartbeat_wall_ns")
        if s.get("start_wall_ns") and life_end and life_end > s["start_wall_ns"]:
            out.append(f'<line x1="{x(s["start_wall_ns"]):.1f}" y1="{y + 40}" '
                       f'x2="{x(life_end):.1f}" y2="{y + 40}" stroke="#888" stroke-width="2">'
                       f'<title>{h(proc.label)}: its blackbox, from creation to the last '
                       'heartbeat or post-mortem</title></line>')
        for c, op, in_flight in operations(proc):
            b0 = proc.wall(op.get("enqueue_mono_ns"))
            if not b0:
                continue
            b1 = proc.wall(op_end_mono(proc, c, op)[0])
            state = op.get("state", "")
            fill = HTML_OP_FILL.get(state, "#888")
            title = (f"{op.get('func')} #{op.get('coll_index') or op.get('op_index')} on "
                     f"{comm_hex(c)}: {state}, {op.get('bytes', 0)} bytes"
                     + (" (in flight at the snapshot)" if in_flight else ""))
            out.append(f'<rect class="op" x="{x(b0):.1f}" y="{y + 22}" '
                       f'width="{max(1.5, x(b1) - x(b0)):.1f}" height="9" fill="{fill}">'
                       f'<title>{h(title)}</title></rect>')
        for f in proc.real_faults():
            w = f.get("wall_ns") or proc.wall(f.get("mono_ns"))
            if not w:
                continue
            title = f"fault: {f.get('class', '?')}: {f.get('text', '')}"
            out.append(f'<path d="M{x(w):.1f},{y + 21} l6,11 l-12,0 z" fill="#d0021b" '
                       'stroke="#fff" stroke-width="0.8">'
                       f'<title>{h(title)}</title></path>')
        if proc.post_mortem and proc.post_mortem_wall_ns:
            cx = x(proc.post_mortem_wall_ns)
            pm = proc.post_mortem
            out.append(f'<g stroke="#000" stroke-width="2"><line x1="{cx - 5:.1f}" y1="{y + 4}" '
                       f'x2="{cx + 5:.1f}" y2="{y + 18}"/><line x1="{cx + 5:.1f}" y1="{y + 4}" '
                       f'x2="{cx - 5:.1f}" y2="{y + 18}"/><title>{h(proc.label)} ended: '
                       f'{h(pm.get("reason", ""))}: {h(pm.get("detail", ""))}</title></g>')
        if s.get("heartbeat_wall_ns") and not s.get("process_alive"):
            cx = x(s["heartbeat_wall_ns"])
            out.append(f'<circle cx="{cx:.1f}" cy="{y + 12}" r="3" fill="none" stroke="#000">'
                       f'<title>{h(proc.label)}: last heartbeat</title></circle>')
    row_of = {proc.pid: i for i, proc in enumerate(procs)}
    for r in all_reports(job):
        if not r.get("wall_ns"):
            continue
        proc = end_process(job, r.get("subject")) if "ranks" not in r else None
        # On its subject's row; above the rows when the records do not hold it.
        y = top + row_of[proc.pid] * row_h + 26 if proc is not None else top - 10
        title = f"{r['kind']}: {report_who(job, r)}: {report_measure(r)}\n{r['text']}"
        out.append(f'<path class="report" data-kind="{h(r["kind"])}" '
                   f'd="M{x(r["wall_ns"]):.1f},{y - 7} l6,7 l-6,7 l-6,-7 z" '
                   f'fill="{HTML_REPORT_FILL}" stroke="#000" stroke-width="0.8">'
                   f'<title>{h(title)}</title></path>')
    for r in restarts(job):
        xx = x(r["wall_ns"])
        out.append(f'<line x1="{xx:.1f}" y1="{top - 8}" x2="{xx:.1f}" y2="{height - 24}" '
                   'stroke="#6a1b9a" stroke-width="1.5" stroke-dasharray="5,3"/>')
        out.append(f'<text x="{xx + 3:.1f}" y="{top - 12}" fill="#6a1b9a">'
                   f'restart \u2192 iteration {r["iteration"]}'
                   f'<title>{h("culprits: " + (r["culprits"] or "?"))}</title></text>')
    out.append("</svg>")
    return "\n".join(out)


def html_table(headers, rows, numeric=()):
    out = ["<table><thead><tr>" + "".join(f"<th>{h(x)}</th>" for x in headers) + "</tr></thead>",
           "<tbody>"]
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            cls = ' class="n"' if i in numeric else ""
            cells.append(f"<td{cls}>{v}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</tbody></table>")
    return "\n".join(out)


def rel(wall, t0):
    return f"{(wall - t0) / 1e9:+.3f} s" if wall and t0 else "-"


def html_page(job):
    rng = time_range(job)
    t0 = rng[0] if rng else None
    procs = job.ordered()
    faults = fault_rows(job)
    reps = all_reports(job)
    rsts = restarts(job)
    parts = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
             f"<title>{h(PROGRAM)}: job {h(job.name)}</title>", f"<style>{HTML_CSS}</style>",
             "</head><body>", f"<h1>Job {h(job.name)}</h1>"]
    summary = (f"ranks: {len(procs)}; faults the plugins recorded: "
               f"{sum(len(p.real_faults()) for p in procs)}; ranks ended (post-mortem): "
               f"{sum(1 for p in procs if p.post_mortem)}; restarts: {len(rsts)}; "
               f"slow-link, straggler and stuck-rank reports: {len(reps)}")
    if rng:
        summary += f"; from {h(iso(rng[0]))} for {(rng[1] - rng[0]) / 1e9:.3f} s"
    parts.append(f'<p class="meta">{summary}.</p>')
    parts.append("<h2>Timeline</h2>")
    legend = "".join(f'<span><i class="sw" style="background:{c}"></i>{h(k)}</span>'
                     for k, c in HTML_PHASE_FILL.items())
    legend += "".join(f'<span><i class="sw" style="background:{c}"></i>NCCL op {h(k)}</span>'
                      for k, c in HTML_OP_FILL.items())
    legend += ('<span><i class="sw" style="background:#d0021b"></i>fault</span>'
               f'<span><i class="sw" style="background:{HTML_REPORT_FILL}"></i>slow link, '
               'straggler or stuck rank (on its subject\'s row)</span>'
               "<span>\u2716 rank ended (post-mortem)</span>"
               '<span><i class="sw" style="background:#888;height:2px"></i>process (blackbox)'
               "</span>"
               '<span style="color:#6a1b9a">- - restart</span>')
    parts.append(f'<p class="legend">{legend}</p>')
    parts.append(svg_timeline(job))
    parts.append("<h2>Faults</h2>")
    if faults:
        rows = [[h(rel(w, t0)), h(iso(w)), h(p.label), h(src), h(cls), h(text)]
                for w, p, src, cls, text in faults]
        parts.append(html_table(["time", "wall clock", "rank", "recorded by", "class", "text"],
                                rows, numeric=(0,)))
    else:
        parts.append("<p>No fault recorded.</p>")
    if rsts:
        parts.append("<h2>Restarts</h2>")
        rows = [[h(r["iteration"]), h(rel(r["wall_ns"], t0)), h(r["culprits"] or "-"),
                 h(rel(r["detected_wall_ns"], t0)), h(r["detected"] or "-")] for r in rsts]
        parts.append(html_table(["iteration", "began", "culprits", "first detection",
                                 "detected by"], rows, numeric=(0, 1, 3)))
    parts.append("<h2>Ranks</h2>")
    rows = []
    for p in procs:
        sent = sum(c.get("completed_bytes") or 0 for c in p.connections()
                   if c.get("direction") == "send")
        recv = sum(c.get("completed_bytes") or 0 for c in p.connections()
                   if c.get("direction") == "recv")
        out_req = sum(c.get("outstanding_requests") or 0 for c in p.connections())
        done = sum((c.get("coll_completed") or 0) + (c.get("p2p_completed") or 0)
                   for c in p.communicators())
        flight = sum(c.get("in_flight") or 0 for c in p.communicators())
        iters = max([e.get("iteration", 0) for e in p.timeline], default=None)
        if p.outcome:
            outcome = p.outcome
        elif p.post_mortem:
            outcome = "ended: " + p.post_mortem.get("reason", "")
        else:
            outcome = "-"
        css = "ok" if outcome == "completed" else "bad" if outcome != "-" else ""
        alive = (p.snapshot or {}).get("process_alive")
        if p.post_mortem is not None:
            alive = False
        rows.append([h(p.rank if p.rank is not None else "?"), h(p.host or "?"),
                     h(p.pid if p.pid > 0 else "?"), f'<span class="{css}">{h(outcome)}</span>',
                     h(p.final_state or "-"), h(iters if iters is not None else "-"),
                     h(len(p.real_faults())), h(sent), h(recv), h(out_req), h(done), h(flight),
                     h("-" if alive is None else "yes" if alive else "no")])
    parts.append(html_table(["rank", "host", "pid", "outcome", "final state", "last iteration",
                             "faults", "bytes sent", "bytes received", "outstanding requests",
                             "ops completed", "ops in flight", "process alive"], rows,
                            numeric=(0, 2, 5, 6, 7, 8, 9, 10, 11)))
    comm_rows = communicator_rows(job)
    if comm_rows:
        parts.append("<h2>Communicators</h2>")
        parts.append(html_table(["communicator", "rank", "comm rank", "state", "coll enqueued",
                                 "coll completed", "p2p completed", "in flight",
                                 "oldest in flight"], comm_rows, numeric=(1, 2, 4, 5, 6, 7)))
    if job.comparisons:
        parts.append("<h2>Who is behind (resilient-inspect --compare)</h2>")
        rows = [[h(comm_hex(c)), h(", ".join(str(b) for b in c.get("behind") or []) or "-"),
                 h(c.get("summary", ""))] for c in job.comparisons]
        parts.append(html_table(["communicator", "ranks behind", "summary"], rows))
    parts.append("<h2>Slow links, stragglers and stuck ranks</h2>")
    parts.append(reports_html(job, reps, t0))
    if job.warnings:
        parts.append("<h2>Notes on the records</h2><ul>" +
                     "".join(f'<li class="warn">{h(w)}</li>' for w in job.warnings) + "</ul>")
    parts.append("<h2>Sources</h2><ul>" + "".join(f"<li>{h(s)}</li>" for s in job.sources) +
                 "</ul>")
    parts.append(f'<p class="meta">Written by {h(PROGRAM)} at {h(iso(time.time_ns()))}. '
                 "Times: wall clock (UTC); each process's monotonic stamps converted with its "
                 "own (mono, wall) pairs.</p>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"


def reports_html(job, reps, t0):
    """The findings (one row each, with the records that hold it), then the last
    standings round of resilient-inspect --job."""
    parts = []
    if reps:
        head = ["time", "wall clock", "kind", "subject \u2192 peer", "ratio, lag or wait",
                "communicator", "reported", "records", "text"]
        out = ["<table><thead><tr>" + "".join(f"<th>{h(x)}</th>" for x in head) +
               "</tr></thead>", "<tbody>"]
        for r in reps:
            ranks = ",".join(str(x) for x in report_ranks(job, r)) or "?"
            cells = [(h(rel(r.get("wall_ns"), t0)), True), (h(iso(r.get("wall_ns"))), False),
                     (h(r["kind"]), False), (h(report_who(job, r)), False),
                     (h(report_measure(r)), False), (h(comm_label(r["comm_id"])), False),
                     (h(r["_times"]), True), (h("; ".join(r["_sources"])), False),
                     (h(r["text"]), False)]
            out.append(f'<tr class="report" data-kind="{h(r["kind"])}" '
                       f'data-subject="{h(ranks)}">' +
                       "".join(('<td class="n">' if n else "<td>") + f"{v}</td>"
                               for v, n in cells) +
                       "</tr>")
        out.append("</tbody></table>")
        parts.append("\n".join(out))
    else:
        parts.append("<p>No report in the records.</p>")
    st = job.standings
    if st is not None:
        parts.append(f"<h3>Last standings (resilient-inspect --job at {h(iso(st['wall_ns']))}, "
                     f"{h(st.get('processes', '?'))} processes)</h3>")
        if st["links"]:
            rows = []
            for link in st["links"]:
                frm, to = end_of(link.get("from")) or {}, end_of(link.get("to")) or {}
                ratio = number(link.get("ratio"))
                rows.append([h(comm_label(parse_comm_id(link.get("comm_id")))),
                             h(f"{end_text(job, frm)} {frm.get('address', '')}"),
                             h(f"{end_text(job, to)} {to.get('address', '')}"),
                             h(rate_text(number(link.get("bytes_per_s")))),
                             h(f"{(number(link.get('busy_fraction')) or 0) * 100:.0f}%"),
                             h(f"{ratio * 100:.0f}%" if ratio else "-"),
                             '<span class="bad">slow</span>' if link.get("slow") else ""])
            parts.append(html_table(["communicator", "from", "to", "throughput while busy",
                                     "busy", "ratio", ""], rows, numeric=(3, 4, 5)))
        else:
            parts.append("<p>No sending link measured in the last window.</p>")
        if st["ranks"]:
            rows = []
            for rank in st["ranks"]:
                who = end_of(rank.get("rank")) or {}
                lag = number(rank.get("lag_ns"))
                last_in = f"{rank.get('last_count', '?')} of {rank.get('collectives', '?')}"
                if number(rank.get("waited")) is not None:
                    last_in = (f"{rank.get('last_count', '?')} of the {rank['waited']} that "
                               f"waited (of {rank.get('collectives', '?')})")
                rows.append([h(comm_label(parse_comm_id(rank.get("comm_id")))),
                             h(end_text(job, who)), h(last_in),
                             h(f"{lag / 1e6:.1f} ms" if lag is not None else "-"),
                             h(f"{number(rank.get('score')) or 0:.2f}"),
                             '<span class="bad">straggler</span>' if rank.get("straggler")
                             else ""])
            parts.append(html_table(["communicator", "rank", "last in", "median lag", "score",
                                     ""], rows, numeric=(3, 4)))
        else:
            parts.append("<p>The last round lists no rank (none was last to a collective "
                         "judged).</p>")
    return "\n".join(parts)


def communicator_rows(job):
    rows = []
    entries = []
    for p in job.ordered():
        for c in p.communicators():
            entries.append((comm_hex(c), p, c))
    entries.sort(key=lambda e: (e[0], e[1].rank if e[1].rank is not None else 10 ** 9))
    for cid, p, c in entries:
        oldest = c.get("oldest_in_flight")
        desc = "-"
        if isinstance(oldest, dict):
            desc = (f"{oldest.get('func')} #{oldest.get('coll_index') or oldest.get('op_index')} "
                    f"{oldest.get('state')}")
        rows.append([h(cid), h(p.rank if p.rank is not None else "?"),
                     h(f"{c.get('rank')}/{c.get('nranks')}"), h(c.get("state", "?")),
                     h(c.get("coll_enqueued", 0)), h(c.get("coll_completed", 0)),
                     h(c.get("p2p_completed", 0)), h(c.get("in_flight", 0)), h(desc)])
    return rows
