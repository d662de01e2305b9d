"""What NCCL's INFO log (NCCL_DEBUG=INFO, NCCL_DEBUG_SUBSYS=INIT,NET) says
about the net plugin a process used: the network each communicator chose
("Using network <name>", init.cc) and the transport of every channel
connection ("Channel 00/0 : 0[0] -> 1[0] [send] via NET/<name>/0",
transport/net.cc; P2P and SHM connections name their own transport), and the
communicators it created ("... commId 0x... - Init COMPLETE").
"""

import re

_USING = re.compile(r"Using network (\S+)")
_VIA = re.compile(r"\[(send|receive)\] via (\S+)")
_COMM = re.compile(r"commId (0x[0-9a-fA-F]+)[^\n]*Init COMPLETE")


def networks(text):
    return set(_USING.findall(text))


def connections(text):
    """[(direction, transport text)], e.g. ("send", "NET/Resilient/0")."""
    return _VIA.findall(text)


def comm_ids(text):
    return {int(h, 16) for h in _COMM.findall(text)}


def plugin_problems(text, net_name):
    """Why the log does not prove that every connection went through the net
    plugin called net_name (empty: it does)."""
    problems = []
    used = networks(text)
    if not used:
        problems.append("no 'Using network' line: is NCCL_DEBUG=INFO with INIT on?")
    elif used != {net_name}:
        problems.append(f"NCCL used the network(s) {sorted(used)}, not {net_name}")
    conns = connections(text)
    if not conns:
        problems.append("no channel connection line ('[send] via ...')")
    other = sorted({t for _, t in conns if not t.startswith(f"NET/{net_name}/")})
    if other:
        problems.append(f"connections through {other}, not NET/{net_name}")
    return problems
