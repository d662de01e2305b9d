"""The package reads the C API's constants, struct layouts and options from
the library at run time; the C header's enums and structs, written by hand
(they are the ABI), must be what the library reports; every option a Wrapper
is not given takes its knob's default."""

import ctypes
import json
import os
import re
import subprocess
import sys

import nccl_resilient as nr
from nccl_resilient import _native

from conftest import BUILD, REPO

HEADER = os.path.join(REPO, "include", "resilient", "restart.h")


def _header_blocks(kind):
    """{typedef name: body} of each `typedef enum|struct { ... } name;` of restart.h."""
    with open(HEADER) as f:
        text = f.read()
    return {m.group(2): m.group(1) for m in re.finditer(
        r"typedef " + kind + r" \{(.*?)\} (resilient_restart_\w+);", text, re.S)}


def _enumerators(body, prefix):
    return {m.group(1).lower(): int(m.group(2))
            for m in re.finditer(prefix + r"(\w+) = (\d+)", body)}


def test_header_enums_are_the_librarys():
    enums = _header_blocks("enum")
    for typedef, group, prefix in [
            ("resilient_restart_status", "status", "RESILIENT_RESTART_"),
            ("resilient_restart_mode", "mode", "RESILIENT_RESTART_MODE_"),
            ("resilient_restart_hook_kind", "hook", "RESILIENT_RESTART_HOOK_"),
            ("resilient_restart_option_type", "option_type", "RESILIENT_RESTART_OPTION_"),
            ("resilient_restart_layer_flag", "layer_flag", "RESILIENT_RESTART_LAYER_")]:
        header = _enumerators(enums[typedef], prefix)
        assert header, typedef
        assert _native.constants(group) == header, typedef
    header = _enumerators(enums["resilient_restart_option_id"], "RESILIENT_RESTART_OPT_")
    table = {spec.c_name: spec.id for spec in nr.options_table().values()}
    assert table == header


def test_header_structs_are_the_librarys():
    structs = _header_blocks("struct")
    for typedef, group, cls in [("resilient_restart_state", "state", _native.CState),
                                ("resilient_restart_slot", "slot", _native.Slot),
                                ("resilient_restart_layer", "layer", _native.CLayer)]:
        fields = re.findall(r"int (\w+);", structs[typedef])
        library = _native.constants(group)
        assert sorted(library, key=library.get) == fields, typedef
        assert [name for name, _ in cls._fields_] == fields, typedef
        assert ctypes.sizeof(cls) == _native.constant("size", group)


def test_modes_are_the_librarys():
    assert {m.name.lower(): m.value for m in nr.Mode} == _native.constants("mode")


def test_every_status_has_its_exception():
    for name, code in _native.constants("status").items():
        error = nr.errors.error_for(code, name)
        if name in ("ok", "should_restart", "error"):
            continue
        assert nr.errors.status_of(error) in (code, _native.status("error")), name


def _clean_env(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("NCCL_") and k not in ("RANK", "WORLD_SIZE")}
    (tmp_path / "empty.conf").write_text("")
    env.update(HOME=str(tmp_path), NCCL_CONF_FILE=str(tmp_path / "empty.conf"),
               PYTHONPATH=os.pathsep.join(sys.path), BUILD_DIR=BUILD)
    return env


def _knob_defaults(env):
    """{variable: text} of every knob as resilient-config resolves it."""
    out = subprocess.run([os.path.join(BUILD, "tools", "config", "resilient-config")], env=env,
                         capture_output=True, text=True, timeout=60, check=True).stdout
    return dict(line.split("\t")[0].split("=", 1) for line in out.splitlines())


def _as_option(spec, text):
    """A knob's text as its option's value in Python."""
    if spec.string:
        return text
    if spec.duration:
        return int(text) / 1000
    if text in ("report", "restart"):  # a health action knob sets a flag: restart or not
        return int(text == "restart")
    return int(text)


def test_every_option_default_is_its_knobs(tmp_path):
    # In a process of its own, with no NCCL_* variable and no nccl.conf: the
    # value each option takes in a Wrapper given nothing (read back from the
    # library's options) against its knob's default (resilient-config).
    env = _clean_env(tmp_path)
    code = ("import json, nccl_resilient as nr\n"
            "w = nr.Wrapper(rank=0, world_size=1)\n"
            "print(json.dumps([w.options, nr.option_defaults()]))\n")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr
    in_wrapper, defaults = json.loads(out.stdout.splitlines()[-1])
    assert {**in_wrapper, "rank": -1, "world_size": -1} == defaults
    knobs = _knob_defaults(env)
    table = nr.options_table()
    with_knob = [name for name, spec in table.items() if spec.knob]
    assert len(with_knob) > 30
    for name in with_knob:
        spec = table[name]
        assert in_wrapper[name] == _as_option(spec, knobs[spec.knob]), (name, spec.knob)


def test_options_given_are_the_options_in_effect():
    w = nr.Wrapper(store_url="memory", rank=0, world_size=1, use_monitor_process=False,
                   soft_timeout=5, hard_timeout=7.5, stuck_rank_restart=True, max_iterations=3)
    assert w.options["soft_timeout"] == 5 and w.options["hard_timeout"] == 7.5
    assert w.options["stuck_rank_restart"] == 1 and w.options["max_iterations"] == 3
    assert w.options["store_url"] == "memory" and w.options["max_active_world_size"] == -1
