#!/usr/bin/python3
"""Checks the facts the prose docs state against the code.

  check_doc_facts.py SOURCE_ROOT RESILIENT_CONFIG     the docs of the tree
  check_doc_facts.py --self-test FIXTURE_DIR          the checker itself

Scanned: README.md, docs/*.md (not docs/reference/, facts about NCCL and other
projects; not docs/performance-history.md, which records what was true then)
and python/README.md. docs/configuration.md is the registry's rendering
(common-docs): read here for the versions and names its knobs' texts state.

(a) ABI versions. The net and profiler versions the code has are read from the
    export maps (plugin/net/abi/exports.map, plugin/profiler/abi/exports.map),
    which must agree with the declarations (include/nccl/net_vN.h,
    profiler_vN.h). In the docs:
    - a symbol or file of a version (`ncclNetPlugin_vN`, `ncclNet_vN`,
      `ncclProfiler_vN`, `net_vN.h`, `profiler_vN.cc`) must name a version the
      code has;
    - a range written with symbols (`ncclNet_v6` … `_v12`, ncclProfiler_v5..v1,
      `ncclNetPlugin_v12` down to `_v6`) names every version we export: it must
      run from the oldest to the newest;
    - a bare range (v6–v12, v1-v7) is such a claim when the clause before it
      names the ABI ("net v6–v12", "profiler plugin ABIs (v6-v12, v1-v7)"):
      then it must run from the oldest to the newest too. Bare ranges in other
      clauses (the v1–v3 semantics) are subsets and only bounded.
(b) Defaults. `resilient-config --markdown` gives every knob's default. A
    default a doc states must be the knob's:
    - a knob named and then, in the same clause, "(default V)", "default V",
      "defaults to V", "V by default", or directly "(V)" / ", V)";
    - "default: `KNOB`, V";
    - a table with a "default" column, in a row whose cell is a knob;
    - a knob's usual name without the variable ("liveness timeout (1 s)",
      "soft timeout (60 s by default)", "at the 1 s liveness timeout", "default
      timeouts (soft 60 s, hard 90 s").
    Durations compare in milliseconds (ms, s, min), sizes in bytes.
(c) Names. Every NCCL_RESILIENT_* name is a knob, or, written NAME_*, the
    prefix of one.

(d) Links. A link to a section (`[..](performance.md#the-test-command)`,
    `[..](#section)`) must name a heading of that file (GitHub's anchors), so
    that moving or renaming a section cannot leave a link behind.

Versions and names are checked in code blocks too (the README's layout is one);
defaults only in prose and tables, since a block of program output shows the
values of its own run. HTML comments are skipped.

Each finding is printed as FILE:LINE: message; the exit status is 1 when there
is any. The self-test runs the checker on FIXTURE_DIR/docs/*.md with the facts
of FIXTURE_DIR/code (export maps and a registry rendering): every line marked
<!-- must fail --> must be reported and no other.
"""

import collections
import glob
import os
import re
import subprocess
import sys

# --- the code's facts ------------------------------------------------------------------

FAMILIES = ('net', 'profiler')
CHECKED = collections.Counter()  # the statements checked, by kind


def exported_versions(map_text):
    """{'net': set, 'profiler': set} of the struct versions an export map exports."""
    found = {'net': set(), 'profiler': set()}
    for m in re.finditer(r'^\s*ncclNetPlugin_v(\d+)\s*;', map_text, re.M):
        found['net'].add(int(m.group(1)))
    for m in re.finditer(r'^\s*ncclProfiler_v(\d+)\s*;', map_text, re.M):
        found['profiler'].add(int(m.group(1)))
    return found


def split_row(line):
    cells = line.strip().strip('|').split('|')
    return [c.strip() for c in cells]


def registry_from_markdown(text):
    """{name: (type, default text)} from the configuration reference's table."""
    knobs = {}
    for line in text.splitlines():
        m = re.match(r'^\| `(NCCL_RESILIENT_[A-Z0-9_]+)` \| (\w+) \| `([^`]*)` \|', line)
        if m:
            knobs[m.group(1)] = (m.group(2), m.group(3))
    return knobs


class Facts:
    def __init__(self, versions, knobs):
        self.versions = versions
        self.knobs = knobs
        for fam in FAMILIES:
            if not versions[fam]:
                raise SystemExit(f'no {fam} ABI version found in the export maps')
        if not knobs:
            raise SystemExit('no knob found in the registry rendering')


def tree_facts(root, config_tool):
    with open(os.path.join(root, 'plugin/net/abi/exports.map')) as f:
        net_map = exported_versions(f.read())
    with open(os.path.join(root, 'plugin/profiler/abi/exports.map')) as f:
        prof_map = exported_versions(f.read())
    problems = []
    if net_map['profiler'] != prof_map['profiler']:
        problems.append('the two libraries export different profiler versions: '
                        f'{sorted(net_map["profiler"])} and {sorted(prof_map["profiler"])}')
    versions = {'net': net_map['net'], 'profiler': prof_map['profiler']}
    for fam in FAMILIES:
        headers = {int(m.group(1)) for p in glob.glob(os.path.join(root, f'include/nccl/{fam}_v*.h'))
                   for m in [re.search(rf'{fam}_v(\d+)\.h$', p)] if m}
        if headers != versions[fam]:
            problems.append(f'include/nccl declares {fam} versions {sorted(headers)}, '
                            f'the export maps {sorted(versions[fam])}')
    out = subprocess.run([config_tool, '--markdown'], capture_output=True, text=True, check=True,
                         env={'PATH': os.environ.get('PATH', '/usr/bin:/bin')})
    return Facts(versions, registry_from_markdown(out.stdout)), problems


def fixture_facts(fixture_dir):
    code = os.path.join(fixture_dir, 'code')
    versions = {'net': set(), 'profiler': set()}
    for name in ('net_exports.map', 'profiler_exports.map'):
        with open(os.path.join(code, name)) as f:
            for fam, vs in exported_versions(f.read()).items():
                versions[fam] |= vs
    with open(os.path.join(code, 'registry.md')) as f:
        knobs = registry_from_markdown(f.read())
    return Facts(versions, knobs)


# --- reading the docs ------------------------------------------------------------------

def doc_files(root):
    files = [os.path.join(root, 'README.md'), os.path.join(root, 'python/README.md')]
    for p in sorted(glob.glob(os.path.join(root, 'docs/*.md'))):
        if os.path.basename(p) == 'performance-history.md':
            continue
        files.append(p)
    return [f for f in files if os.path.exists(f)]


def strip_code_blocks(text):
    """Blanks fenced code blocks (command lines, program output), keeping line numbers."""
    out, fenced = [], False
    for line in text.split('\n'):
        if line.lstrip().startswith('```'):
            fenced = not fenced
            out.append('')
            continue
        out.append('' if fenced else line)
    return '\n'.join(out)


def line_of(text, pos):
    return text.count('\n', 0, pos) + 1


# --- (a) ABI versions ------------------------------------------------------------------

# One end of a range: a symbol or file of a version, or a bare vN / _vN.
SYMBOL = r'(?:ncclNetPlugin_|ncclNet_|ncclProfiler_|net_|profiler_)v\d+(?:\.(?:h|cc))?'
END = r'`?(?:' + SYMBOL + r'|_?v\d+(?:\.(?:h|cc))?)`?'
RANGE = re.compile(r'(?<![\w.])(' + END + r')\s*(?:–|-|\.\.|…|\bdown to\b|\bto\b|\bthrough\b)\s*(' + END + r')(?![\w])')
SYMBOL_ONE = re.compile(r'(?<![\w/])(ncclNetPlugin_|ncclNet_|ncclProfiler_)v(\d+)\b')


def family_of_symbol(token):
    t = token.strip('`')
    if t.startswith(('ncclNetPlugin_', 'ncclNet_', 'net_')):
        return 'net'
    if t.startswith(('ncclProfiler_', 'profiler_')):
        return 'profiler'
    return None


def version_of(token):
    return int(re.search(r'v(\d+)', token).group(1))


def clause_before(text, pos, width=60):
    start = max(0, pos - width)
    window = text[start:pos]
    cut = max(window.rfind(c) for c in ('. ', ';', '|', ':', '\n\n'))
    return window[cut + 1:] if cut >= 0 else window


def check_abi(text, facts, report):
    for m in SYMBOL_ONE.finditer(text):
        fam = 'net' if m.group(1).startswith('ncclNet') else 'profiler'
        v = int(m.group(2))
        if v not in facts.versions[fam]:
            report(line_of(text, m.start()), f'{m.group(0)}: the code has no {fam} ABI v{v} '
                   f'(it exports v{min(facts.versions[fam])}–v{max(facts.versions[fam])})')
    for m in RANGE.finditer(text):
        a, b = m.group(1), m.group(2)
        fam = family_of_symbol(a) or family_of_symbol(b)
        if fam is None:
            clause = clause_before(text, m.start()).lower()
            words = re.findall(r'\bnet\b|\bnccl_?net|\bprofiler\b|\bncclprofiler|\babis?\b', clause)
            if not words:
                hi = max(version_of(a), version_of(b))
                top = max(max(facts.versions[f]) for f in FAMILIES)
                if hi > top:
                    report(line_of(text, m.start()), f'{m.group(0)}: no ABI of the code has v{hi}')
                continue
            has_net = any(w.startswith(('net', 'nccl_net', 'ncclnet')) for w in words)
            has_prof = any('profiler' in w for w in words)
            if has_net and not has_prof:
                fam = 'net'
            elif has_prof and not has_net:
                fam = 'profiler'
            else:  # "ABIs", or both named: the oldest version tells them apart
                low = min(version_of(a), version_of(b))
                fam = 'profiler' if low < min(facts.versions['net']) else 'net'
        lo, hi = sorted((version_of(a), version_of(b)))
        CHECKED['ABI ranges'] += 1
        want = (min(facts.versions[fam]), max(facts.versions[fam]))
        if (lo, hi) != want:
            report(line_of(text, m.start()),
                   f'"{" ".join(m.group(0).split())}": the code exports {fam} '
                   f'v{want[0]}–v{want[1]}, not v{lo}–v{hi}')


# --- (b) defaults, (c) names ----------------------------------------------------------

UNITS_MS = {'ms': 1, 's': 1000, 'min': 60000, 'minutes': 60000, 'h': 3600000}
UNITS_BYTES = {'bytes': 1, 'B': 1, 'KiB': 1024, 'MiB': 1024 ** 2, 'GiB': 1024 ** 3}
VALUE = r'`?-?[\w./]*\d[\w./]*(?:\s?(?:ms|s|min|minutes|h|bytes|B|KiB|MiB|GiB))?\b`?|`[^`]*`|empty'


def normalize(knob, kind, text):
    """The value a doc wrote, in the registry's terms; None when it cannot be read."""
    t = text.strip().strip('`').strip()
    if t == 'empty':
        return ''
    if kind == 'integer':
        m = re.fullmatch(r'(-?\d+(?:\.\d+)?)\s*([A-Za-z]+)?', t.replace(',', ''))
        if not m:
            return None
        num, unit = float(m.group(1)), m.group(2)
        if unit:
            if knob.endswith('_MS') and unit in UNITS_MS:
                num *= UNITS_MS[unit]
            elif knob.endswith('_BYTES') and unit in UNITS_BYTES:
                num *= UNITS_BYTES[unit]
            elif knob.endswith(('_MS', '_BYTES')):
                return f'{t} (not a unit of {knob})'  # never equal to the default
            # else "40 %", "100 errors": the number is the value
        return str(int(num)) if num == int(num) else str(num)
    if kind == 'bool':
        return {'1': '1', 'on': '1', 'true': '1', 'yes': '1',
                '0': '0', 'off': '0', 'false': '0', 'no': '0'}.get(t.lower())
    return t


def same_default(knob, facts, written):
    CHECKED['defaults'] += 1
    kind, default = facts.knobs[knob]
    got = normalize(knob, kind, written)
    want = normalize(knob, kind, default) if kind in ('integer', 'bool') else default
    return got is None or got == want, default


# The usual names of knobs in prose.
ALIASES = {
    'liveness timeout': 'NCCL_RESILIENT_LIVENESS_TIMEOUT_MS',
    'progress timeout': 'NCCL_RESILIENT_PROGRESS_TIMEOUT_MS',
    'collective timeout': 'NCCL_RESILIENT_COLL_TIMEOUT_MS',
    'soft timeout': 'NCCL_RESILIENT_RESTART_SOFT_TIMEOUT_MS',
    'hard timeout': 'NCCL_RESILIENT_RESTART_HARD_TIMEOUT_MS',
    'heartbeat timeout': 'NCCL_RESILIENT_RESTART_HEARTBEAT_TIMEOUT_MS',
    'store timeout': 'NCCL_RESILIENT_STORE_TIMEOUT_MS',
    "store's default timeout": 'NCCL_RESILIENT_STORE_TIMEOUT_MS',
    'stuck-rank timeout': 'NCCL_RESILIENT_STUCK_RANK_TIMEOUT_MS',
}
SHORT = {'soft': 'NCCL_RESILIENT_RESTART_SOFT_TIMEOUT_MS',
         'hard': 'NCCL_RESILIENT_RESTART_HARD_TIMEOUT_MS'}

KNOB = re.compile(r'NCCL_RESILIENT_[A-Z0-9_]*(?:[A-Z0-9]|_?\*)')


def quoted(text, pos):
    para = text.rfind('\n\n', 0, pos)
    before = text[para + 1 if para >= 0 else 0:pos]
    return (before.count('"') + before.count('\u201c') - before.count('\u201d')) % 2 == 1


def check_knob_names(text, facts, report):
    for m in KNOB.finditer(text):
        name = m.group(0)
        CHECKED['knob names'] += 1
        if name == 'NCCL_RESILIENT_*':
            continue
        if name.endswith('*'):
            prefix = name[:-1]
            if not any(k.startswith(prefix) for k in facts.knobs):
                report(line_of(text, m.start()), f'{name}: no knob starts with {prefix}')
        elif name not in facts.knobs:
            report(line_of(text, m.start()), f'{name}: no such knob in the registry')


def check_knobs(text, facts, report):
    flat = text.replace('\n', ' ')  # clauses run over line ends; positions unchanged

    def lineno(pos):
        return line_of(text, pos)

    for m in KNOB.finditer(flat):
        name = m.group(0)
        if name not in facts.knobs:
            continue
        after = flat[m.end():m.end() + 80]
        after = re.split(r'\. |;|\|', after)[0]
        pats = [r'^`?\s*\((?:default:?\s*)?(' + VALUE + r')\)',
                r'^`?\s*,\s*(' + VALUE + r')\)',
                r'\(default:?\s+(' + VALUE + r')\)',
                r'\bdefaults? to\s+(' + VALUE + r')',
                r'\bdefault:?\s+(' + VALUE + r')',
                r'(?<![\w`])(' + VALUE + r')\s+by default']
        for p in pats:
            v = re.search(p, after)
            if v:
                ok, default = same_default(name, facts, v.group(1))
                if not ok:
                    report(lineno(m.start()), f'{name}: the doc says {v.group(1)}, '
                           f'the registry\'s default is `{default}`')
                break
    for m in re.finditer(r'\bdefault:\s*`?(NCCL_RESILIENT_[A-Z0-9_]+)`?,\s*(' + VALUE + r')\)', flat):
        name = m.group(1)
        if name in facts.knobs:
            ok, default = same_default(name, facts, m.group(2))
            if not ok:
                report(lineno(m.start()), f'{name}: the doc says {m.group(2)}, '
                       f'the registry\'s default is `{default}`')
    for alias, name in ALIASES.items():
        if name not in facts.knobs:
            continue
        a = re.escape(alias).replace(r'\ ', r'\s+')
        pats = [r'\bthe\s+' + a + r'\s*\((' + VALUE + r')\)',
                r'\b' + a + r'\s*\((' + VALUE + r')\s+by default\)',
                r'\b' + a + r',\s*(' + VALUE + r')\s+by default',
                r'\b' + a + r'\s+defaults\s+to\s+(' + VALUE + r')',
                r'\bdefault\s+' + a + r'\s*(?:\(|,|of)\s*(' + VALUE + r')',
                r'\bthe\s+(' + VALUE + r')\s+(?:default\s+)?' + a + r'\b']
        for p in pats:
            for v in re.finditer(p, flat, re.I):
                if quoted(text, v.start()):
                    continue  # a message quoted with its own values
                ok, default = same_default(name, facts, v.group(1))
                if not ok:
                    report(lineno(v.start()), f'"{v.group(0)}": {name}\'s default is `{default}`')
    for m in re.finditer(r'\bdefault timeouts\s*\(([^)]*)\)', flat):
        for part in re.finditer(r'\b(soft|hard)\s+(' + VALUE + r')', m.group(1)):
            name = SHORT[part.group(1)]
            ok, default = same_default(name, facts, part.group(2))
            if not ok:
                report(lineno(m.start()), f'"{part.group(0)}": {name}\'s default is `{default}`')


def check_tables(text, facts, report):
    lines = text.split('\n')
    col = None
    for n, line in enumerate(lines, 1):
        if not line.lstrip().startswith('|'):
            col = None
            continue
        cells = split_row(line)
        if col is None:
            lowered = [c.lower() for c in cells]
            col = lowered.index('default') if 'default' in lowered else -1
            continue
        if col < 0 or col >= len(cells) or re.fullmatch(r'[-: ]+', cells[0] or '-'):
            continue
        knob = next((c.strip('`') for c in cells if re.fullmatch(r'`?NCCL_RESILIENT_[A-Z0-9_]+`?', c)),
                    None)
        if knob and knob in facts.knobs:
            ok, default = same_default(knob, facts, cells[col])
            if not ok:
                report(n, f'{knob}: the table says {cells[col]}, the registry\'s default is `{default}`')


def heading_anchors(path):
    with open(path, encoding='utf-8') as f:
        text = strip_code_blocks(f.read())
    found, seen = set(), {}
    for m in re.finditer(r'^#+\s+(.*?)\s*$', text, re.M):
        base = re.sub(r'[^\w\- ]', '', m.group(1).strip().lower()).replace(' ', '-')
        n = seen.get(base, 0)
        seen[base] = n + 1
        found.add(base if n == 0 else f'{base}-{n}')
    return found


def check_links(path, text, report):
    for m in re.finditer(r'\]\(([^)\s#]*)#([^)\s]+)\)', text):
        target = os.path.normpath(os.path.join(os.path.dirname(path), m.group(1))) if m.group(1) else path
        CHECKED['section links'] += 1
        if not os.path.exists(target):
            report(line_of(text, m.start()), f'link to {m.group(1)}: no such file')
        elif target.endswith('.md') and m.group(2) not in heading_anchors(target):
            report(line_of(text, m.start()),
                   f'link to {m.group(1) or "this file"}#{m.group(2)}: no such section')


def check_file(path, facts):
    with open(path, encoding='utf-8') as f:
        raw = f.read()
    # Versions and names are checked in code blocks too (the README's layout is one);
    # defaults are not: a block of program output shows the values of its run.
    full = re.sub(r'<!--.*?-->', lambda m: ' ' * len(m.group(0)), raw)
    prose = strip_code_blocks(full)
    findings = []

    def report(line, msg):
        findings.append((line, msg))
    check_abi(full, facts, report)
    check_knob_names(full, facts, report)
    check_knobs(prose, facts, report)
    check_tables(prose, facts, report)
    check_links(path, prose, report)
    return raw, sorted(set(findings))


def main(argv):
    if len(argv) == 3 and argv[1] == '--self-test':
        fixture_dir = argv[2]
        facts = fixture_facts(fixture_dir)
        failed = False
        docs = sorted(glob.glob(os.path.join(fixture_dir, 'docs', '*.md')))
        if not docs:
            print('no fixture docs'); return 1
        marked_total = 0
        for path in docs:
            raw, findings = check_file(path, facts)
            marked = {n for n, line in enumerate(raw.split('\n'), 1) if '<!-- must fail -->' in line}
            marked_total += len(marked)
            flagged = {n for n, _ in findings}
            for n in sorted(marked - flagged):
                print(f'{path}:{n}: the checker missed this stale fact'); failed = True
            for n, msg in findings:
                if n not in marked:
                    print(f'{path}:{n}: false finding: {msg}'); failed = True
            for n, msg in findings:
                print(f'  ok, rejected {os.path.basename(path)}:{n}: {msg}')
        if marked_total == 0:
            print('the fixtures mark nothing to reject'); return 1
        print('self-test ' + ('FAILED' if failed else f'passed: {marked_total} stale facts rejected'))
        return 1 if failed else 0
    if len(argv) != 3:
        print(__doc__); return 2
    root, tool = argv[1], argv[2]
    facts, problems = tree_facts(root, tool)
    for p in problems:
        print(f'code: {p}')
    count = len(problems)
    for path in doc_files(root):
        _, findings = check_file(path, facts)
        for n, msg in findings:
            print(f'{os.path.relpath(path, root)}:{n}: {msg}')
        count += len(findings)
    print(f'{count} finding(s); net ABI v{min(facts.versions["net"])}–v{max(facts.versions["net"])}, '
          f'profiler v{min(facts.versions["profiler"])}–v{max(facts.versions["profiler"])}, '
          f'{len(facts.knobs)} knobs; checked: '
          + ', '.join(f'{n} {k}' for k, n in sorted(CHECKED.items())))
    return 1 if count else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
