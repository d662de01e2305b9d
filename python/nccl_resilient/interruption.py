"""Interrupting Python code when a restart begins.

C++ has no asynchronous exception; Python has one: the library's interrupt
hook (run by its monitor thread the moment a restart begins, before any
communicator is aborted) raises ``RankShouldRestart`` in the thread that runs
the wrapped function with ``PyThreadState_SetAsyncExc``. It fires at the next
bytecode that thread executes, so a thread blocked in C (a torch collective)
is released first by the abort of its process group
(``nccl_resilient.distributed.AbortTorchDistributed``), or must poll
(``nccl_resilient.distributed.wait``); either way the exception is pending
before the abort completes the collective with partial sums, and is raised
before the function can use them.

The exception is only raised while the wrapped function runs, never in an
``atomic()`` section: one that arrives there is deferred and raised when the
section ends (the library's own abort already waits for the section).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Optional

from .errors import RankShouldRestart

_set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
_set_async_exc.argtypes = [ctypes.c_ulong, ctypes.py_object]
_set_async_exc.restype = ctypes.c_int


class Interrupter:
    """Raises RankShouldRestart in one thread, only where that is safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._thread: Optional[int] = None  # the thread running the wrapped function
        self._held = 0                      # nested atomic() sections
        self._pending = False               # raised, maybe not delivered yet
        self._deferred = False              # asked for while held

    def _clear_pending(self) -> None:
        if self._pending and self._thread is not None:
            _set_async_exc(self._thread, ctypes.py_object())  # NULL: clears an undelivered one
        self._pending = False

    def enter(self) -> None:
        """The calling thread starts the wrapped function."""
        with self._lock:
            self._thread = threading.get_ident()
            self._held = 0
            self._pending = self._deferred = False

    def leave(self) -> None:
        """The wrapped function returned or raised: nothing may fire after this."""
        with self._lock:
            self._clear_pending()
            self._thread = None
            self._deferred = False

    def interrupt(self) -> bool:
        """From any thread: interrupt the wrapped function (now, or when its
        atomic section ends). False when it does not run."""
        with self._lock:
            if self._thread is None:
                return False
            if self._held > 0:
                self._deferred = True
                return True
            if not self._pending:
                if _set_async_exc(self._thread, RankShouldRestart) > 1:
                    _set_async_exc(self._thread, ctypes.py_object())
                    return False
                self._pending = True
            return True

    def hold(self) -> None:
        """Entering an atomic section: an interruption waits for its end."""
        with self._lock:
            if self._thread != threading.get_ident():
                return
            if self._held == 0 and self._pending:
                self._clear_pending()
                self._deferred = True
            self._held += 1

    def release(self) -> None:
        """Leaving an atomic section: raises a deferred interruption here."""
        raise_now = False
        with self._lock:
            if self._thread != threading.get_ident() or self._held == 0:
                return
            self._held -= 1
            if self._held == 0 and self._deferred:
                self._deferred = False
                raise_now = True
        if raise_now:
            raise RankShouldRestart("a restart began during an atomic section")
