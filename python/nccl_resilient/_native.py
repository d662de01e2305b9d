"""The restart library's C API (include/resilient/restart.h) through ctypes.

The package is pure Python over libresilient-restart.so, so that one wheel
works with any CPython 3 (Debian's 3.11, a GPU machine's 3.12) and needs no
compiler. ctypes releases the GIL for the whole of every call into the
library, and takes it back for the Python callbacks the library makes (hooks,
the wrapped function).

The library is looked for, in order: in the package's own ``_lib``
directory (where ``pip install .`` puts it, built by Meson through
meson-python with resilient-monitor and the plugins beside it), in the build
directory of a source checkout this package sits in (``../build/restart``),
then by the system's loader (an installed library).
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Optional

LIBRARY = "libresilient-restart.so"
NET_PLUGIN = "libnccl-net-resilient.so"
PROFILER_PLUGIN = "libnccl-profiler-resilient.so"

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_dir: Optional[Path] = None


class LibraryNotFound(ImportError):
    """libresilient-restart.so was found nowhere."""


def _candidates() -> list[Path]:
    here = Path(__file__).resolve().parent
    found = [here / "_lib"]
    checkout = here.parent.parent  # python/nccl_resilient -> the repository
    build = os.environ.get("BUILD_DIR")
    if build:
        found.append(Path(build if os.path.isabs(build) else checkout / build) / "restart")
    found.append(checkout / "build" / "restart")
    return found


def _declare(lib: ctypes.CDLL) -> None:
    c_int, c_ll, c_size, c_char_p, c_void_p = (ctypes.c_int, ctypes.c_longlong, ctypes.c_size_t,
                                               ctypes.c_char_p, ctypes.c_void_p)
    pp = ctypes.POINTER(ctypes.c_char_p)
    proto = {
        "resilient_restart_version": (c_char_p, []),
        "resilient_restart_last_error": (c_char_p, []),
        "resilient_restart_status_name": (c_char_p, [c_int]),
        "resilient_restart_set_callback_error": (None, [c_char_p]),
        "resilient_restart_options_from_environment": (c_void_p, []),
        "resilient_restart_options_destroy": (None, [c_void_p]),
        "resilient_restart_option_by_name": (ctypes.POINTER(OptionInfo), [c_char_p]),
        "resilient_restart_option_next": (ctypes.POINTER(OptionInfo), [ctypes.POINTER(OptionInfo)]),
        "resilient_restart_option_knob": (c_char_p, [c_int]),
        "resilient_restart_options_set_int": (c_int, [c_void_p, c_int, c_ll]),
        "resilient_restart_options_set_string": (c_int, [c_void_p, c_int, c_char_p]),
        "resilient_restart_options_get_int": (c_int, [c_void_p, c_int, ctypes.POINTER(c_ll)]),
        "resilient_restart_options_get_string":
            (c_int, [c_void_p, c_int, c_char_p, c_size, ctypes.POINTER(c_size)]),
        "resilient_restart_options_set_hook": (c_int, [c_void_p, c_int, HOOK, c_void_p]),
        "resilient_restart_options_add_host_communicator": (c_int, [c_void_p, c_char_p, c_char_p]),
        "resilient_restart_policy_stock": (c_void_p, [c_char_p, c_ll]),
        "resilient_restart_policy_callback": (c_void_p, [c_char_p, POLICY, c_void_p]),
        "resilient_restart_policy_destroy": (None, [c_void_p]),
        "resilient_restart_options_set_rank_assignment":
            (c_int, [c_void_p, ctypes.POINTER(c_void_p), c_size]),
        "resilient_restart_policy_tree":
            (c_void_p, [ctypes.POINTER(CLayer), c_size, LAYER_KEY, WORLD_SIZE_FILTER, c_void_p]),
        "resilient_restart_policy_apply":
            (c_int, [ctypes.POINTER(c_void_p), c_size, ctypes.POINTER(Slot), c_int,
                     ctypes.POINTER(c_int), c_int, c_int]),
        "resilient_restart_retry_controller": (c_void_p, [c_ll, c_int, c_int]),
        "resilient_restart_health_check_stock": (c_void_p, [c_char_p, c_ll]),
        "resilient_restart_health_check_run": (c_int, [c_void_p, ctypes.POINTER(CState)]),
        "resilient_restart_health_check_destroy": (None, [c_void_p]),
        "resilient_restart_wrapper_create": (c_void_p, [c_void_p]),
        "resilient_restart_wrapper_destroy": (None, [c_void_p]),
        "resilient_restart_run": (c_int, [c_void_p, FUNCTION, c_void_p]),
        "resilient_restart_wrapper_state": (c_int, [c_void_p, ctypes.POINTER(CState)]),
        "resilient_restart_timeline_json":
            (c_int, [c_void_p, c_char_p, c_size, ctypes.POINTER(c_size)]),
        "resilient_restart_context_state": (c_int, [c_void_p, ctypes.POINTER(CState)]),
        "resilient_restart_context_watch_nccl_comm": (c_int, [c_void_p, c_void_p, c_char_p]),
        "resilient_restart_ping": (None, [c_void_p]),
        "resilient_restart_cancelled": (c_int, [c_void_p]),
        "resilient_restart_atomic_begin": (None, [c_void_p]),
        "resilient_restart_atomic_end": (None, [c_void_p]),
        "resilient_restart_hang_protection_off": (None, [c_void_p]),
        "resilient_restart_hang_protection_on": (None, [c_void_p]),
        "resilient_restart_collective_enter":
            (c_int, [c_void_p, c_char_p, c_char_p, c_int, c_int]),
        "resilient_restart_collective_leave": (c_int, [c_void_p, c_char_p]),
        "resilient_restart_allreduce_sum_f32":
            (c_int, [c_void_p, c_char_p, c_void_p, c_void_p, c_size]),
        "resilient_restart_broadcast": (c_int, [c_void_p, c_char_p, c_void_p, c_size, c_int]),
        "resilient_restart_barrier": (c_int, [c_void_p, c_char_p]),
        "resilient_restart_store_open": (c_void_p, [c_char_p, c_ll]),
        "resilient_restart_store_close": (None, [c_void_p]),
        "resilient_restart_free": (None, [c_void_p]),
        "resilient_restart_store_set": (c_int, [c_void_p, c_char_p, c_char_p, c_size, c_ll]),
        "resilient_restart_store_get": (c_int, [c_void_p, c_char_p, ctypes.POINTER(c_void_p),
                                                ctypes.POINTER(c_size), ctypes.POINTER(c_int),
                                                c_ll]),
        "resilient_restart_store_add":
            (c_int, [c_void_p, c_char_p, c_ll, ctypes.POINTER(c_ll), c_ll]),
        "resilient_restart_store_compare_set":
            (c_int, [c_void_p, c_char_p, c_char_p, c_size, c_int, c_char_p, c_size,
                     ctypes.POINTER(c_int), ctypes.POINTER(c_void_p), ctypes.POINTER(c_size),
                     ctypes.POINTER(c_int), c_ll]),
        "resilient_restart_store_wait": (c_int, [c_void_p, pp, c_size, c_ll]),
        "resilient_restart_store_check":
            (c_int, [c_void_p, pp, c_size, ctypes.POINTER(c_int), c_ll]),
        "resilient_restart_store_delete":
            (c_int, [c_void_p, c_char_p, ctypes.POINTER(c_int), c_ll]),
        "resilient_restart_store_delete_prefix":
            (c_int, [c_void_p, c_char_p, ctypes.POINTER(c_ll), c_ll]),
    }
    for name, (restype, argtypes) in proto.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes


class LibraryMismatch(ImportError):
    """The library's constants or structs are not what this package expects."""


class CState(ctypes.Structure):
    """resilient_restart_state: its fields (ints) and their offsets are the
    library's, read when it is loaded (_layout)."""


class Slot(ctypes.Structure):
    """resilient_restart_slot, laid out as CState."""


class CLayer(ctypes.Structure):
    """resilient_restart_layer, laid out as CState."""


class OptionInfo(ctypes.Structure):
    """resilient_restart_option_info (its size is checked against the library's)."""

    _fields_ = [("name", ctypes.c_char_p), ("id", ctypes.c_int), ("type", ctypes.c_int)]


class Constant(ctypes.Structure):
    """resilient_restart_constant."""

    _fields_ = [("group", ctypes.c_char_p), ("name", ctypes.c_char_p), ("value", ctypes.c_int)]


HOOK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(CState), ctypes.c_void_p)
FUNCTION = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
POLICY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Slot), ctypes.c_int,
                          ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int,
                          ctypes.c_void_p)

# A Tree layer's key: (layer, initial_rank, buffer, size, *length, user) -> 0.
LAYER_KEY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p,
                             ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t), ctypes.c_void_p)
WORLD_SIZE_FILTER = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int),
                                     ctypes.c_void_p)

_constants: dict = {}  # {group: {name: value}}, the library's (resilient_restart_constant_next)


def _read_constants(lib: ctypes.CDLL) -> dict:
    next_constant = lib.resilient_restart_constant_next
    next_constant.restype = ctypes.POINTER(Constant)
    next_constant.argtypes = [ctypes.POINTER(Constant)]
    table: dict = {}
    row = next_constant(None)
    while row:
        c = row.contents
        table.setdefault(c.group.decode(), {})[c.name.decode()] = c.value
        row = next_constant(row)
    return table


def _layout(cls, group: str, table: dict) -> None:
    """cls's fields from the library's offsets: ints, in offset order, no gap."""
    offsets = table.get(group, {})
    names = sorted(offsets, key=offsets.get)
    width = ctypes.sizeof(ctypes.c_int)
    if ([offsets[n] for n in names] != [i * width for i in range(len(names))]
            or table.get("size", {}).get(group) != width * len(names)):
        raise LibraryMismatch(f"{LIBRARY}: resilient_restart_{group} is not a row of ints "
                              f"({offsets}, size {table.get('size', {}).get(group)})")
    cls._fields_ = [(n, ctypes.c_int) for n in names]


def _check(table: dict) -> None:
    from .state import Mode  # noqa: PLC0415 - state.py is a leaf; imported once, here
    mine = {m.name.lower(): m.value for m in Mode}
    if mine != table.get("mode"):
        raise LibraryMismatch(f"{LIBRARY}: modes {table.get('mode')}, the package's {mine}")
    from .assignment import LayerFlag  # noqa: PLC0415 - as above
    mine = {f.name.lower(): f.value for f in LayerFlag}
    if mine != table.get("layer_flag"):
        raise LibraryMismatch(f"{LIBRARY}: layer flags {table.get('layer_flag')}, "
                              f"the package's {mine}")
    if table.get("size", {}).get("option_info") != ctypes.sizeof(OptionInfo):
        raise LibraryMismatch(f"{LIBRARY}: resilient_restart_option_info has another size")


def constant(group: str, name: str) -> int:
    """A constant of restart.h as the library knows it: constant("status",
    "should_restart"), constant("hook", "abort"), ..."""
    if _lib is None:
        library()
    try:
        return _constants[group][name]
    except KeyError:
        raise LibraryMismatch(f"{LIBRARY} has no {group} {name!r}") from None


def constants(group: str) -> dict:
    """{name: value} of one group of the library's constants."""
    library()
    return dict(_constants.get(group, {}))


def status(name: str) -> int:
    """The code of a status of the C API, by its name ("ok", "should_restart", ...)."""
    return constant("status", name)


def library() -> ctypes.CDLL:
    """The loaded library (loaded on first use)."""
    global _lib, _dir
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for d in _candidates():
            path = d / LIBRARY
            tried.append(str(path))
            if path.exists():
                lib = ctypes.CDLL(str(path))
                _dir = d.resolve()
                break
        else:
            try:
                lib = ctypes.CDLL(LIBRARY)
            except OSError as e:
                raise LibraryNotFound(
                    f"{LIBRARY} not found (tried {', '.join(tried)} and the system's loader: {e}); "
                    "build the project (meson setup build && ninja -C build) or install it") from e
            _dir = None
        table = _read_constants(lib)
        _layout(CState, "state", table)
        _layout(Slot, "slot", table)
        _layout(CLayer, "layer", table)
        _check(table)
        _declare(lib)
        _constants.update(table)
        _lib = lib
        return lib


def library_dir() -> Optional[Path]:
    """The directory the library was loaded from (None: found by the system's
    loader). The net plugin and the monitor executable sit beside it."""
    library()
    return _dir


def last_error() -> str:
    return (library().resilient_restart_last_error() or b"").decode(errors="replace")


def callback_failed(error: BaseException, status: int) -> int:
    """What a callback returns for `error`: its text goes to the library
    (resilient_restart_set_callback_error), the status back to it."""
    text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    library().resilient_restart_set_callback_error(text.encode(errors="replace"))
    return status
