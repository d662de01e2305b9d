"""The restart library's C API (include/resilient/restart.h) through ctypes.

The package is pure Python over libresilient-restart.so, so that one wheel
works with any CPython 3 (Debian's 3.11, a GPU machine's 3.12) and needs no
compiler. ctypes releases the GIL for the whole of every call into the
library, and takes it back for the Python callbacks the library makes (hooks,
the wrapped function).

The library is looked for, in order: in the package's own ``_lib``
directory (filled by ``pip install`` from a build directory), in the build
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
        "resilient_restart_options_set_int": (c_int, [c_void_p, c_int, c_ll]),
        "resilient_restart_options_set_string": (c_int, [c_void_p, c_int, c_char_p]),
        "resilient_restart_options_set_hook": (c_int, [c_void_p, c_int, HOOK, c_void_p]),
        "resilient_restart_options_add_host_communicator": (c_int, [c_void_p, c_char_p, c_char_p]),
        "resilient_restart_policy_stock": (c_void_p, [c_char_p, c_ll]),
        "resilient_restart_policy_callback": (c_void_p, [c_char_p, POLICY, c_void_p]),
        "resilient_restart_policy_destroy": (None, [c_void_p]),
        "resilient_restart_options_set_rank_assignment":
            (c_int, [c_void_p, ctypes.POINTER(c_void_p), c_size]),
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


class CState(ctypes.Structure):
    """resilient_restart_state."""

    _fields_ = [(name, ctypes.c_int) for name in (
        "initial_rank", "initial_world_size", "rank", "world_size", "active_rank",
        "active_world_size", "iteration", "mode", "fn_failed", "culprit")]


class OptionInfo(ctypes.Structure):
    """resilient_restart_option_info."""

    _fields_ = [("name", ctypes.c_char_p), ("id", ctypes.c_int), ("type", ctypes.c_int)]


class Slot(ctypes.Structure):
    """resilient_restart_slot."""

    _fields_ = [("rank", ctypes.c_int), ("mode", ctypes.c_int), ("active_rank", ctypes.c_int)]


HOOK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(CState), ctypes.c_void_p)
FUNCTION = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
POLICY = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(Slot), ctypes.c_int,
                          ctypes.POINTER(ctypes.c_int), ctypes.c_int, ctypes.c_int,
                          ctypes.c_void_p)

# resilient_restart_status
(OK, SHOULD_RESTART, ABORTED, DISCARDED, HEALTH_CHECK, TIMEOUT, CONFIG, COMMUNICATOR, ERROR,
 STORE_UNAVAILABLE) = range(10)
# resilient_restart_hook_kind
HOOK_KINDS = {"initialize": 0, "abort": 1, "finalize": 2, "health_check": 3, "completion": 4,
              "terminate": 5}


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
        _declare(lib)
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
