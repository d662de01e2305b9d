#!/usr/bin/env python3
"""libresilient-restart.so exports its public API and nothing else.

Every dynamic symbol the library defines (`nm -D --defined-only`, demangled)
must be either a C function `resilient_restart_*` declared in
include/resilient/restart.h, or a member of namespace resilient::restart
(function, class member, type information, vtable) whose top-level name is a
class, struct, enum or function declared in the public headers
(include/resilient/restart/*.hpp). Prints each offending symbol.

It also checks that the library's read-only data holds no path of the build
that made it (an installed library must never look into a build tree).

Usage: check_exports.py LIBRARY INCLUDE_DIR BUILD_ROOT
"""

import os
import re
import subprocess
import sys

PREFIXES = ("typeinfo name for ", "typeinfo for ", "vtable for ", "VTT for ", "guard variable for ",
            "construction vtable for ")


def public_names(include_dir):
    cxx, c = set(), set()
    headers = os.path.join(include_dir, "resilient", "restart")
    for name in sorted(os.listdir(headers)):
        with open(os.path.join(headers, name)) as f:
            text = f.read()
        cxx |= set(re.findall(r"\b(?:class|struct|enum class|enum|using)\s+([A-Za-z_]\w*)", text))
        cxx |= set(re.findall(r"\b([A-Za-z_]\w*)\s*\(", text))
        cxx |= set(re.findall(r"\b(operator\s*\S+?)\s*\(", text))
    with open(os.path.join(include_dir, "resilient", "restart.h")) as f:
        c |= set(re.findall(r"\b(resilient_restart_\w+)\s*\(", f.read()))
    return {n.replace(" ", "") for n in cxx}, c


def top_level(symbol):
    """'Wrapper' of 'resilient::restart::Wrapper::run(...)'; None outside the namespace."""
    for p in PREFIXES:
        if symbol.startswith(p):
            symbol = symbol[len(p):]
            break
    ns = "resilient::restart::"
    if not symbol.startswith(ns):
        return None
    rest = symbol[len(ns):]
    if rest.startswith("operator"):
        return re.match(r"operator\S+?(?=\(|$)", rest).group(0)
    return re.match(r"[A-Za-z_]\w*", rest).group(0)


def main():
    library, include_dir, build_root = sys.argv[1], sys.argv[2], sys.argv[3]
    out = subprocess.run(["nm", "-DC", "--defined-only", library], check=True, capture_output=True,
                         text=True).stdout
    cxx, c = public_names(include_dir)
    bad, count = [], 0
    for line in out.splitlines():
        parts = line.split(" ", 2)
        if len(parts) < 3:
            continue
        symbol = parts[2]
        count += 1
        if symbol.startswith("resilient_restart_"):
            if symbol not in c:
                bad.append(f"{symbol}: a C symbol not declared in resilient/restart.h")
            continue
        top = top_level(symbol)
        if top is None:
            bad.append(f"{symbol}: outside namespace resilient::restart")
        elif top not in cxx:
            bad.append(f"{symbol}: {top} is not declared in the public headers")
    for b in bad:
        print("EXPORTED BUT NOT PUBLIC:", b)
    print(f"{count} exported symbols, {len(bad)} not public API")
    rodata = subprocess.run(["readelf", "-p", ".rodata", library], check=True,
                            capture_output=True).stdout.decode(errors="replace")
    builds = [line.strip() for line in rodata.splitlines() if build_root in line]
    for line in builds:
        print("PATH OF THE BUILD IN .rodata:", line[:200])
    return 1 if bad or builds or count == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
