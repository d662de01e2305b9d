#!/usr/bin/env python3
"""Checks the facts the docs state against the code.

A doc that names an ABI version we do not export, or gives a knob a default
the registry does not have, fails here. What counts as the code:
- the ABI versions: the exported structs of plugin/net/abi/exports.map and
  plugin/profiler/abi/exports.map (the `plugin-exports` test checks those
  against the built libraries);
- the knobs and their defaults: docs/configuration.md's table, the registry's
  rendering (the `common-docs` test checks it against common/param_registry).

What a doc states, read here:
- a knob, `NCCL_RESILIENT_X`, must be a knob of the registry;
- a knob followed or preceded by a value, "`KNOB`, 4 s", "`KNOB` (20 ms",
  "(1 s, `KNOB`", "`KNOB` (default 2)", "default: `KNOB`, 300 s", is its
  default and must equal the registry's (units converted for _MS knobs);
- a named timeout with "by default" ("the liveness timeout (1000 ms by
  default)", "the soft timeout (60 s by default)") is that knob's default;
- an exported struct, ncclNetPlugin_vN or ncclProfiler_vN, must be exported;
  a range of versions on a line that speaks of our exports or declarations
  ("exports ncclNetPlugin_v12 … ncclNetPlugin_v6", "ABIs (v6-v12, v1-v7)")
  must be exactly the net or the profiler versions we export.

Usage: check_doc_facts.py SOURCE_ROOT            check the tree's docs
       check_doc_facts.py SOURCE_ROOT --self-test check that the checker rejects
                                                 the wrong facts of fixtures/
"""

import pathlib
import re
import sys

UNITS_MS = {"ms": 1, "s": 1000, "min": 60000}
NUMBER = r"(-?\d+(?:\.\d+)?)\s*(ms|s|min)?"
KNOB = r"NCCL_RESILIENT_[A-Z0-9_]*[A-Z0-9]"

# Named timeouts the prose gives "by default", and the knob each one is.
NAMED_DEFAULTS = {
    "liveness timeout": "NCCL_RESILIENT_LIVENESS_TIMEOUT_MS",
    "soft timeout": "NCCL_RESILIENT_RESTART_SOFT_TIMEOUT_MS",
    "hard timeout": "NCCL_RESILIENT_RESTART_HARD_TIMEOUT_MS",
    "progress timeout": "NCCL_RESILIENT_PROGRESS_TIMEOUT_MS",
    "collective timeout": "NCCL_RESILIENT_COLL_TIMEOUT_MS",
    "barrier timeout": "NCCL_RESILIENT_RESTART_BARRIER_TIMEOUT_MS",
    "store timeout": "NCCL_RESILIENT_STORE_TIMEOUT_MS",
    "health interval": "NCCL_RESILIENT_HEALTH_INTERVAL_MS",
    "stuck-rank timeout": "NCCL_RESILIENT_STUCK_RANK_TIMEOUT_MS",
}

# The docs a reader meets; not the facts about other projects
# (docs/reference/), not the history of figures, not the generated reference.
SKIPPED = {"docs/configuration.md", "docs/performance-history.md"}


def doc_files(root):
    files = [root / "README.md", root / "python" / "README.md"]
    files += sorted((root / "docs").glob("*.md"))
    files += sorted((root / "examples").rglob("*.md"))
    return [f for f in files if f.is_file() and f.relative_to(root).as_posix() not in SKIPPED]


def exported_versions(root):
    def versions(map_path, prefix):
        text = (root / map_path).read_text()
        return sorted({int(v) for v in re.findall(prefix + r"_v(\d+);", text)})

    return {
        "net": versions("plugin/net/abi/exports.map", "ncclNetPlugin"),
        "profiler": versions("plugin/profiler/abi/exports.map", "ncclProfiler"),
    }


def registry_defaults(root):
    """{knob: default text} from docs/configuration.md's table."""
    defaults = {}
    row = re.compile(r"^\| `(" + KNOB + r")` \| [a-z]+ \| `?([^`|]*)`? \|")
    for line in (root / "docs" / "configuration.md").read_text().splitlines():
        m = row.match(line)
        if m:
            defaults[m.group(1)] = m.group(2).strip()
    if not defaults:
        raise SystemExit("docs/configuration.md: no knob table found")
    return defaults


def as_registry_value(knob, number, unit):
    """The doc's value in the registry's unit, or None when it cannot be one."""
    value = float(number)
    if knob.endswith("_MS"):
        value *= UNITS_MS[unit or "ms"]
    elif unit:
        return None  # a duration given to a knob that is not one: not its default
    return value


def check_default(knob, number, unit, defaults, where, errors):
    if knob not in defaults:
        return  # reported as an unknown knob
    registry = defaults[knob]
    try:
        expected = float(registry)
    except ValueError:
        return  # a text default; a number next to it is not its default
    stated = as_registry_value(knob, number, unit)
    if stated is None:
        return
    if stated != expected:
        shown = f"{number} {unit}" if unit else number
        errors.append(f"{where}: {knob}: the doc gives {shown}, the registry's default is "
                      f"{registry}{' ms' if knob.endswith('_MS') else ''}")


def check_text(name, text, versions, defaults):
    """(wrong facts, facts read) of one doc."""
    errors = []
    facts = 0
    knob_then_value = re.compile(r"`(" + KNOB + r")`\s*(?:,|\()\s*(?:default:?\s*)?`?" + NUMBER +
                                 r"\b(?!\s*(?:%|x\b|in the|here|for |when|with))")
    value_then_knob = re.compile(r"\(" + NUMBER + r",\s*`(" + KNOB + r")`")
    default_knob_value = re.compile(r"default:?\s*`(" + KNOB + r")`,\s*" + NUMBER + r"\b")
    named = re.compile(r"\b(" + "|".join(map(re.escape, NAMED_DEFAULTS)) + r")s?\b[ ,(:]*(?:(?:of|is)\s+)?"
                       + NUMBER + r"\s+by default", re.IGNORECASE)
    struct = re.compile(r"\bnccl(NetPlugin|Profiler)_v(\d+)\b")
    version_range = re.compile(r"(?<![A-Za-z0-9])v(\d+)`?\s*(?:-|–|…|\.\.\.?|to)\s*`?"
                               r"(?:nccl(?:NetPlugin|Profiler))?_?v?(\d+)\b")
    about_ours = re.compile(r"export|ABIs|declarations", re.IGNORECASE)

    # Statements wrap across lines: read the text as one line (a newline as a
    # space keeps each offset, so a match still names its line).
    flat = text.replace("\n", " ")

    def where(offset):
        return f"{name}:{text.count(chr(10), 0, offset) + 1}"

    for m in re.finditer(r"\b(" + KNOB + r")\b(_\*)?", flat):
        facts += 1
        if m.group(1) not in defaults and not m.group(2):
            errors.append(f"{where(m.start())}: {m.group(1)} is not a knob of the registry")
    for m in knob_then_value.finditer(flat):
        facts += 1
        check_default(m.group(1), m.group(2), m.group(3), defaults, where(m.start()), errors)
    for m in value_then_knob.finditer(flat):
        facts += 1
        check_default(m.group(3), m.group(1), m.group(2), defaults, where(m.start()), errors)
    for m in default_knob_value.finditer(flat):
        facts += 1
        check_default(m.group(1), m.group(2), m.group(3), defaults, where(m.start()), errors)
    for m in named.finditer(flat):
        facts += 1
        check_default(NAMED_DEFAULTS[m.group(1).lower()], m.group(2), m.group(3), defaults,
                      where(m.start()), errors)
    for m in struct.finditer(flat):
        facts += 1
        kind = "net" if m.group(1) == "NetPlugin" else "profiler"
        if int(m.group(2)) not in versions[kind]:
            errors.append(f"{where(m.start())}: {m.group(0)} is not exported (we export {kind} "
                          f"v{versions[kind][0]}-v{versions[kind][-1]})")
    # A range of versions is ours only on a line that says so.
    for number, line in enumerate(text.splitlines(), 1):
        if about_ours.search(line):
            for m in version_range.finditer(line):
                facts += 1
                low, high = sorted((int(m.group(1)), int(m.group(2))))
                if not any((low, high) == (v[0], v[-1]) for v in versions.values()):
                    errors.append(f"{name}:{number}: v{low}-v{high} is neither the net ABIs we export "
                                  f"(v{versions['net'][0]}-v{versions['net'][-1]}) nor the "
                                  f"profiler's (v{versions['profiler'][0]}-"
                                  f"v{versions['profiler'][-1]})")
    return errors, facts


def self_test(root, versions, defaults):
    """Each bad-*.md fixture states one wrong fact and must fail; good-*.md must pass."""
    fixtures = sorted((pathlib.Path(__file__).parent / "fixtures").glob("*.md"))
    if not fixtures:
        raise SystemExit("self-test: no fixtures")
    failed = False
    for fixture in fixtures:
        text = fixture.read_text()
        errors, _ = check_text(fixture.name, text, versions, defaults)
        good = fixture.name.startswith("good-")
        if good and errors:
            print(f"self-test: {fixture.name} is right but the checker says: {errors}")
            failed = True
        elif not good and not errors:
            print(f"self-test: {fixture.name} states a wrong fact the checker did not see")
            failed = True
        else:
            print(f"self-test: {fixture.name}: {'accepted' if good else errors[0]}")
    return 1 if failed else 0


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    root = pathlib.Path(sys.argv[1])
    versions = exported_versions(root)
    defaults = registry_defaults(root)
    if "--self-test" in sys.argv[2:]:
        return self_test(root, versions, defaults)
    errors = []
    facts = 0
    files = doc_files(root)
    for path in files:
        wrong, read = check_text(path.relative_to(root).as_posix(), path.read_text(), versions,
                                 defaults)
        errors += wrong
        facts += read
    for e in errors:
        print(e)
    print(f"{len(files)} docs read, {facts} facts checked, {len(errors)} wrong")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
