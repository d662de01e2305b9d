#!/usr/bin/env bash
# The recording shim without a GPU. Usage: test_recorder.sh BUILD_DIR
#  net:      resilient-nettest, 2 ranks on loopback, loads the recorder as its
#            net plugin with libnccl-net-resilient.so inside; each rank must
#            leave a net-<pid>.jsonl whose lines all parse and show the whole
#            connection life (listen, connect, accept, isend, irecv, test with
#            done=1, closes), every call successful.
#  profiler: resilient-recorder-profiler-probe drives the recorder's
#            ncclProfiler_v5 with libnccl-profiler-resilient.so inside, then
#            without an inner profiler, with a line cap, and without
#            RESILIENT_RECORDER_DIR.
# Exit status: 0 pass, 1 a check failed, 77 a needed program is missing.
set -uo pipefail

build=${1:?usage: test_recorder.sh BUILD_DIR}
recorder=$build/tests/gpu/recorder/libnccl-resilient-recorder.so
probe=$build/tests/gpu/recorder/resilient-recorder-profiler-probe
nettest=$build/tools/nettest/resilient-nettest
net_inner=$build/plugin/net/abi/libnccl-net-resilient.so
profiler_inner=$build/plugin/profiler/libnccl-profiler-resilient.so

for f in "$recorder" "$probe" "$nettest" "$net_inner" "$profiler_inner"; do
  [[ -e $f ]] || { echo "SKIP: $f is missing (build it first)"; exit 77; }
done
command -v python3 >/dev/null || { echo "SKIP: python3 is missing"; exit 77; }

work=$(mktemp -d "${TMPDIR:-/tmp}/recorder-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# ---- net ---------------------------------------------------------------------
mkdir -p "$work/net" "$work/blackbox"
echo "== net: resilient-nettest through the recorder"
if ! RESILIENT_RECORDER_DIR=$work/net RESILIENT_RECORDER_NET_INNER=$net_inner \
    NCCL_RESILIENT_SOCKET_IFNAME=lo NCCL_RESILIENT_BLACKBOX_DIR=$work/blackbox \
    "$nettest" --plugin "$recorder" --ranks 2 --pattern allreduce -b 8 -e 64K -f 16 \
    -n 2 -w 1 --timeout 30 >"$work/nettest.out" 2>&1; then
  cat "$work/nettest.out"
  fail "resilient-nettest through the recorder failed"
fi
if grep -q "not recorded" "$work/nettest.out"; then
  cat "$work/nettest.out"
  fail "the recorder did not record (see its message above)"
fi

python3 - "$work/net" <<'EOF' || fail "net lines (see above)"
import glob, json, os, sys

def load(path):
    lines = []
    with open(path, encoding="utf-8") as f:
        for n, text in enumerate(f, 1):
            try:
                lines.append(json.loads(text))
            except ValueError as e:
                sys.exit(f"{path}:{n}: not JSON ({e}): {text[:200]!r}")
    return lines

files = sorted(glob.glob(os.path.join(sys.argv[1], "net-*.jsonl")))
ranks = []
for path in files:
    lines = load(path)
    name = os.path.basename(path)
    times = [l["t_ns"] for l in lines]
    if times != sorted(times):
        sys.exit(f"{name}: t_ns goes down")
    if any("truncated" in l for l in lines):
        sys.exit(f"{name}: truncated")
    calls = [l["call"] for l in lines]
    if "isend" not in calls:
        continue  # a process that loaded the plugin without moving data
    ranks.append(name)
    bad = [l for l in lines if l.get("rc") != 0]
    if bad:
        sys.exit(f"{name}: calls failed: {bad[:3]}")
    for call in ["init", "devices", "getProperties", "listen", "connect", "accept", "regMr",
                 "isend", "irecv", "test", "deregMr", "closeSend", "closeRecv", "closeListen",
                 "finalize"]:
        if call not in calls:
            sys.exit(f"{name}: no {call} line (calls: {sorted(set(calls))})")
    tests = [l for l in lines if l["call"] == "test"]
    if not all(l["done"] == 1 and l["polls"] >= 1 for l in tests):
        sys.exit(f"{name}: a test line without done=1: {[l for l in tests if l['done'] != 1][:3]}")
    by_call = lambda c: [l for l in lines if l["call"] == c]
    send_comms = {l["sendComm"] for l in by_call("connect")}
    recv_comms = {l["recvComm"] for l in by_call("accept")}
    listen_comms = {l["listenComm"] for l in by_call("listen")}
    if None in send_comms | recv_comms | listen_comms:
        sys.exit(f"{name}: a connect/accept/listen line without its comm id")
    if not {l["listenComm"] for l in by_call("accept")} <= listen_comms:
        sys.exit(f"{name}: accept on an unknown listen comm")
    if not {l["sendComm"] for l in by_call("isend")} <= send_comms:
        sys.exit(f"{name}: isend on a comm no connect returned")
    if not {l["recvComm"] for l in by_call("irecv")} <= recv_comms:
        sys.exit(f"{name}: irecv on a comm no accept returned")
    if {l["sendComm"] for l in by_call("closeSend")} != send_comms:
        sys.exit(f"{name}: closeSend does not close every send comm")
    posted = {l["req"] for l in by_call("isend") + by_call("irecv")}
    completed = {l["req"] for l in tests}
    if None in posted:
        sys.exit(f"{name}: an isend/irecv line without its request id")
    if not completed <= posted | {l["req"] for l in by_call("iflush")}:
        sys.exit(f"{name}: a test line names a request nobody posted")
    sends = by_call("isend")
    # (mh is null here: the TCP transport's regMr returns a NULL handle for host memory)
    if not all(l["size"] >= 0 and isinstance(l["tag"], int) and "mh" in l for l in sends):
        sys.exit(f"{name}: an isend line without size/tag/mh: {sends[:2]}")
    recvs = by_call("irecv")
    if not all(len(l["sizes"]) == l["n"] == len(l["tags"]) == len(l["mh"]) for l in recvs):
        sys.exit(f"{name}: an irecv line whose arrays do not have n entries")
    if set(calls) & {"regMrDmaBuf", "getDeviceMr", "irecvConsumed", "makeVDevice", "setNetAttr"}:
        sys.exit(f"{name}: an optional member the inner plugin lacks was called")
    pending = posted - completed
    if pending:  # the engine waits for every transfer before it checks the bytes
        sys.exit(f"{name}: requests posted but never completed: {sorted(pending)[:5]}")
    print(f"{name}: {len(lines)} lines, {len(sends)} isend, {len(recvs)} irecv, "
          f"{len(tests)} test (polls {sum(l['polls'] for l in tests)})")
if len(ranks) != 2:
    sys.exit(f"expected 2 ranks with traffic, found {len(ranks)} among {len(files)} files")
EOF
echo "net: ok"

# ---- profiler ----------------------------------------------------------------
profile() {  # DIR [VAR=VALUE...]: runs the probe on the recorder with DIR as the recording dir
  local dir=$1
  shift
  mkdir -p "$dir"
  env RESILIENT_RECORDER_DIR="$dir" NCCL_RESILIENT_BLACKBOX_DIR="$work/blackbox" "$@" \
    "$probe" "$recorder" >"$dir.out" 2>&1
}

echo "== profiler: the probe through the recorder, libnccl-profiler-resilient.so inside"
profile "$work/prof" RESILIENT_RECORDER_PROFILER_INNER="$profiler_inner" ||
  { cat "$work/prof.out"; fail "the probe failed with the resilient profiler inside"; }
echo "== profiler: without an inner profiler"
profile "$work/bare" ||
  { cat "$work/bare.out"; fail "the probe failed without an inner profiler"; }
echo "== profiler: a cap of 5 lines"
profile "$work/cap" RESILIENT_RECORDER_MAX_LINES=5 ||
  { cat "$work/cap.out"; fail "the probe failed with a line cap"; }
echo "== profiler: no RESILIENT_RECORDER_DIR"
env -u RESILIENT_RECORDER_DIR NCCL_RESILIENT_BLACKBOX_DIR="$work/blackbox" \
  "$probe" "$recorder" >"$work/nodir.out" 2>&1 ||
  { cat "$work/nodir.out"; fail "the probe failed without RESILIENT_RECORDER_DIR"; }
grep -q "RESILIENT_RECORDER_DIR is not set" "$work/nodir.out" ||
  { cat "$work/nodir.out"; fail "no message about the unset RESILIENT_RECORDER_DIR"; }
[[ $(grep -c "nccl-resilient recorder" "$work/nodir.out") == 1 ]] ||
  { cat "$work/nodir.out"; fail "expected exactly one recorder message on stderr"; }

python3 - "$work" "$profiler_inner" <<'EOF' || fail "profiler lines (see above)"
import glob, json, os, sys

work, inner = sys.argv[1], sys.argv[2]

def one_file(sub):
    files = glob.glob(os.path.join(work, sub, "profiler-*.jsonl"))
    if len(files) != 1:
        sys.exit(f"{sub}: expected one profiler-<pid>.jsonl, found {files}")
    with open(files[0], encoding="utf-8") as f:
        return [json.loads(text) for text in f]

def check_stream(sub, with_inner):
    lines = one_file(sub)
    bad = [l for l in lines if l.get("rc") != 0]
    if bad:
        sys.exit(f"{sub}: calls failed: {bad[:3]}")
    init = lines[0]
    if init["call"] != "init" or init["rank"] != 0 or init["nranks"] != 2:
        sys.exit(f"{sub}: the first line is not the init: {init}")
    # The probe's name, escaped in JSON (the byte 0xff, not UTF-8, reads as U+FFFD).
    name = 'probe "comm"\\\n\t\x01 \u00e9 \ufffd'
    if init["commId"] != "0x1234abcd5678ef00" or init["commName"] != name:
        sys.exit(f"{sub}: init without the communicator: {init}")
    if with_inner:
        if init["inner"] != inner or not init["mask"]:
            sys.exit(f"{sub}: init without the inner profiler or its mask: {init}")
    elif init["inner"] is not None or init["mask"] != 4095:
        sys.exit(f"{sub}: without an inner profiler the mask must be 4095: {init}")
    starts = {l["type"]: l for l in lines if l["call"] == "start"}
    types = ["GroupApi", "CollApi", "Group", "Coll", "ProxyOp", "ProxyStep", "NetPlugin",
             "KernelCh", "ProxyCtrl"]
    if sorted(starts) != sorted(types):
        sys.exit(f"{sub}: start lines {sorted(starts)}, expected {sorted(types)}")
    ids = {t: starts[t]["id"] for t in types}
    if len(set(ids.values())) != len(ids) or any(starts[t]["ctx"] != init["ctx"] for t in types):
        sys.exit(f"{sub}: event ids not distinct or context missing: {starts}")
    parents = {"CollApi": "GroupApi", "Coll": "Group", "ProxyOp": "Coll",
               "ProxyStep": "ProxyOp", "NetPlugin": "ProxyStep", "KernelCh": "Coll"}
    for child, parent in parents.items():
        if starts[child]["parent"] != ids[parent]:
            sys.exit(f"{sub}: {child}'s parent is {starts[child]['parent']}, not {parent} "
                     f"({ids[parent]})")
    c = starts["Coll"]
    if (c["parentGroup"], c["seqNumber"], c["func"], c["datatype"], c["algo"], c["proto"],
            c["count"], c["nChannels"], c["nWarps"]) != (
            ids["Group"], 7, "AllReduce", "ncclFloat32", "RING", "SIMPLE", 1024, 2, 16):
        sys.exit(f"{sub}: Coll descriptor: {c}")
    o = starts["ProxyOp"]
    if (o["channelId"], o["peer"], o["nSteps"], o["chunkSize"], o["isSend"]) != (1, 1, 4, 131072, 1):
        sys.exit(f"{sub}: ProxyOp descriptor: {o}")
    if starts["NetPlugin"]["pluginId"] != 0x30001 or starts["NetPlugin"]["data"] is not True:
        sys.exit(f"{sub}: NetPlugin descriptor: {starts['NetPlugin']}")
    if starts["KernelCh"]["pTimer"] != 1000 or starts["GroupApi"]["groupDepth"] != 1:
        sys.exit(f"{sub}: KernelCh/GroupApi descriptor")
    if with_inner != any(l["innerHandle"] for l in starts.values()):
        sys.exit(f"{sub}: innerHandle does not match the presence of an inner profiler")
    states = {l["stateName"]: l for l in lines if l["call"] == "state"}
    expect = {"ProxyStepSendWait": ("transSize", 4096), "NetPluginUpdate": ("data", True),
              "KernelChStop": ("pTimer", 2000), "ProxyCtrlAppendEnd": ("appendedProxyOps", 3),
              "GroupStartApiStop": ("args", None)}
    for name, (key, value) in expect.items():
        if name not in states or states[name].get(key, "absent") != value:
            sys.exit(f"{sub}: state {name}: expected {key}={value!r}: {states.get(name)}")
    stops = [l["id"] for l in lines if l["call"] == "stop"]
    if sorted(stops) != sorted(ids.values()):
        sys.exit(f"{sub}: stop lines {stops} do not match the events {ids}")
    fin = lines[-1]
    if fin["call"] != "finalize" or fin["ctx"] != init["ctx"] or fin["events"] != len(types):
        sys.exit(f"{sub}: the last line is not the finalize of all events: {fin}")
    print(f"{sub}: {len(lines)} lines, mask {init['mask']}, {len(starts)} event types")

check_stream("prof", True)
check_stream("bare", False)
cap = one_file("cap")
if len(cap) != 6 or cap[-1].get("truncated") is not True or cap[-1].get("lines") != 5:
    sys.exit(f"cap: expected 5 lines and a truncated line, got {len(cap)}: {cap[-1]}")
print("cap: 5 lines and the truncated line")
EOF
echo "profiler: ok"
