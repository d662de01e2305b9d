"""The restart loop in Python: ``Wrapper`` and the ``CallContext`` of one call.

    wrapper = nccl_resilient.Wrapper(soft_timeout=60, hard_timeout=90,
                                     abort=nccl_resilient.distributed.AbortTorchDistributed())

    @wrapper
    def train(ctx: nccl_resilient.CallContext):
        ...

    train()   # runs until one call completed on every active rank

A thin layer over the C API: the loop, its barriers, timeouts, monitor
process and store are the library's; what is Python here is the function,
the hooks, the policies and the interruption of the running function
(interruption.py).
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import functools
import inspect
import json
import os
import threading
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Union

from . import _native
from .assignment import Policy, install
from .errors import (ConfigError, RankShouldRestart, RestartAbort, check, error_for,
                     status_of)
from .interruption import Interrupter
from .state import Mode, State

Hook = Callable[[State], None]
HookArg = Union[None, Hook, Sequence[Hook]]
Duration = Union[int, float, datetime.timedelta]

_current: Optional["CallContext"] = None  # the context of the function running now


def current_context() -> Optional["CallContext"]:
    """The CallContext of the wrapped function running now (None outside one)."""
    return _current


class OptionSpec(NamedTuple):
    """One option of the library (resilient_restart_option_info)."""

    c_name: str          # "soft_timeout_ms"
    id: int              # resilient_restart_option_id
    string: bool         # a string (else an integer: a number, a flag or a duration)
    duration: bool       # milliseconds in C, seconds (or a timedelta) here
    knob: Optional[str]  # the NCCL_RESILIENT_* variable of its default (None: the library's)


def options_table() -> Dict[str, OptionSpec]:
    """{python name: OptionSpec} of every option of the library. Durations
    drop the C name's "_ms" and take seconds (or a timedelta)."""
    lib = _native.library()
    string = _native.constant("option_type", "string")
    table = {}
    info = lib.resilient_restart_option_next(None)
    while info:
        c_name = info.contents.name.decode()
        duration = c_name.endswith("_ms")
        knob = lib.resilient_restart_option_knob(info.contents.id)
        table[c_name[:-3] if duration else c_name] = OptionSpec(
            c_name, info.contents.id, info.contents.type == string, duration,
            knob.decode() if knob else None)
        info = lib.resilient_restart_option_next(info)
    return table


def _option_values(c_options: int) -> Dict[str, Any]:
    """{python name: value} of every option in `c_options` (durations in seconds)."""
    lib = _native.library()
    values: Dict[str, Any] = {}
    for name, spec in options_table().items():
        if spec.string:
            length = ctypes.c_size_t()
            check(lib.resilient_restart_options_get_string(c_options, spec.id, None, 0,
                                                           ctypes.byref(length)))
            buf = ctypes.create_string_buffer(length.value + 1)
            check(lib.resilient_restart_options_get_string(c_options, spec.id, buf, len(buf),
                                                           ctypes.byref(length)))
            values[name] = buf.value.decode(errors="replace")
        else:
            number = ctypes.c_longlong()
            check(lib.resilient_restart_options_get_int(c_options, spec.id, ctypes.byref(number)))
            values[name] = number.value / 1000 if spec.duration else number.value
    return values


def option_defaults() -> Dict[str, Any]:
    """{python name: value} that each option not given to a Wrapper takes:
    its knob's (environment, nccl.conf, else the knob's default), the
    library's where it has none. Durations in seconds."""
    lib = _native.library()
    c_options = lib.resilient_restart_options_from_environment()
    if not c_options:
        raise ConfigError(_native.last_error())
    try:
        return _option_values(c_options)
    finally:
        lib.resilient_restart_options_destroy(c_options)


def _milliseconds(name: str, value: Duration) -> int:
    if isinstance(value, datetime.timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        raise ConfigError(f"{name}: a duration in seconds or a timedelta, not {value!r}")
    return int(round(seconds * 1000))


def _compose(name: str, hooks: HookArg) -> Optional[Hook]:
    """One hook from a callable or a list (the last runs first, as Compose;
    an abort list runs every abort even when one raises)."""
    if hooks is None:
        return None
    if callable(hooks):
        return hooks
    chain = list(hooks)[::-1]
    for h in chain:
        if not callable(h):
            raise ConfigError(f"{name}: {h!r} is not callable")

    def run_all(state: State) -> None:
        first: Optional[BaseException] = None
        for h in chain:
            try:
                h(state)
            except BaseException as e:
                if name != "abort":
                    raise
                first = first or e
        if first is not None:
            raise first

    return run_all


class CallContext:
    """What the wrapped function gets for one call (the C++ CallContext)."""

    def __init__(self, pointer: int, wrapper: "Wrapper") -> None:
        self._ptr = pointer
        self._wrapper = wrapper
        self._lib = _native.library()

    @property
    def state(self) -> State:
        c = _native.CState()
        check(self._lib.resilient_restart_context_state(self._ptr, ctypes.byref(c)))
        return State._from_c(c, self._wrapper._fn_exception)

    @property
    def iteration(self) -> int:
        return self.state.iteration

    @property
    def rank(self) -> int:
        """Rank among the active ranks (what torch.distributed calls the rank)."""
        return self.state.active_rank

    @property
    def world_size(self) -> int:
        """Active ranks in this iteration."""
        return self.state.active_world_size

    @property
    def active(self) -> bool:
        return self.state.active

    def ping(self) -> None:
        """Progress: arms the soft/hard timeouts on its first call, then refreshes them."""
        self._lib.resilient_restart_ping(self._ptr)

    @property
    def cancelled(self) -> bool:
        """True once a restart has begun."""
        return bool(self._lib.resilient_restart_cancelled(self._ptr))

    def check_cancelled(self) -> None:
        """Raises RankShouldRestart once a restart has begun."""
        if self.cancelled:
            raise RankShouldRestart("a restart has begun")

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        """A section the abort never interrupts (e.g. writing a checkpoint);
        an interruption that arrives meanwhile is raised when it ends."""
        interrupter = self._wrapper._interrupter
        interrupter.hold()
        try:
            self._lib.resilient_restart_atomic_begin(self._ptr)
            try:
                yield
            finally:
                self._lib.resilient_restart_atomic_end(self._ptr)
        finally:
            interrupter.release()

    @contextlib.contextmanager
    def disable_hang_protection(self) -> Iterator[None]:
        """While inside, the soft and hard timeouts do not apply to this rank."""
        self._lib.resilient_restart_hang_protection_off(self._ptr)
        try:
            yield
        finally:
            self._lib.resilient_restart_hang_protection_on(self._ptr)

    def enter_collective(self, group: str, function: str, rank: int, nranks: int) -> None:
        """This rank enters the next collective of ``group`` (a name every
        rank of it gives alike), where it is ``rank`` of ``nranks``, where no
        NCCL profiler sees it (gloo): the job's health comparison then finds
        stragglers and stuck ranks there too. ``leave_collective`` ends it."""
        check(self._lib.resilient_restart_collective_enter(
            self._ptr, group.encode(), function.encode(), int(rank), int(nranks)))

    def leave_collective(self, group: str) -> None:
        check(self._lib.resilient_restart_collective_leave(self._ptr, group.encode()))

    def watch_nccl_communicator(self, handle: int, library: Optional[str] = None) -> None:
        """Watch an NCCL communicator made outside the library (an
        ncclComm_t address, e.g. torch's): its asynchronous error starts
        the restart at once; a restart revokes it (NCCL >= 2.28.7); it is
        never freed by the library. ``library``: the libnccl that made it."""
        check(self._lib.resilient_restart_context_watch_nccl_comm(
            self._ptr, ctypes.c_void_p(int(handle)), library.encode() if library else None))

    # The library's host communicators (Wrapper(host_communicators=[...])).
    def all_reduce_sum(self, data, name: Optional[str] = None) -> None:
        """In-place sum of a float32 buffer (array('f'), numpy, a torch CPU
        tensor's numpy view) across the active ranks."""
        view = memoryview(data).cast("B")
        if view.nbytes % 4:
            raise ConfigError("all_reduce_sum: a float32 buffer")
        buf = (ctypes.c_char * view.nbytes).from_buffer(view)
        check(self._lib.resilient_restart_allreduce_sum_f32(
            self._ptr, name.encode() if name else None, buf, buf, view.nbytes // 4))

    def broadcast(self, data, root: int = 0, name: Optional[str] = None) -> None:
        view = memoryview(data).cast("B")
        buf = (ctypes.c_char * view.nbytes).from_buffer(view)
        check(self._lib.resilient_restart_broadcast(
            self._ptr, name.encode() if name else None, buf, view.nbytes, root))

    def barrier(self, name: Optional[str] = None) -> None:
        check(self._lib.resilient_restart_barrier(self._ptr, name.encode() if name else None))


class Wrapper:
    """Runs a function until one call completed on every active rank,
    restarting it in-process after a fault anywhere in the job.

    Options are keywords named as the C++ Options fields in snake case
    (``soft_timeout``, ``max_iterations``, ``store_url``, ...; durations in
    seconds or as timedeltas); each not given comes from its
    ``NCCL_RESILIENT_RESTART_*`` knob (environment or nccl.conf), as in C++.
    ``nccl_resilient.options()`` lists them, ``nccl_resilient.option_defaults()``
    gives what each not given takes; ``wrapper.options`` holds every option's
    value in effect.

    Hooks (each a callable taking a State, or a list of them: the last runs
    first): ``initialize``, ``abort`` (from the library's monitor thread,
    before the running function is interrupted), ``finalize``,
    ``health_check`` (raise HealthCheckError), ``completion``, ``terminate``.
    ``rank_assignment``: a list of policies (assignment.py).
    ``host_communicators``: names of the library's host-engine communicators
    made for every iteration (CallContext.all_reduce_sum, ...).
    ``set_distributed_env``: before every call, RANK and WORLD_SIZE are the
    active rank and active world size (torch's view), LOCAL_RANK kept.

    Use as ``wrapper.run(fn, *args)`` or as a decorator. The function gets
    the CallContext in a parameter annotated ``CallContext`` (or named
    ``call_context``): the first positional one, or a keyword; it returns
    its result (None on a spare). An exception it raises is a fault of this
    rank (every rank restarts; the next call sees it in
    ``State.fn_exception``), RestartAbort ends the job.
    """

    def __init__(self, *, initialize: HookArg = None, abort: HookArg = None,
                 finalize: HookArg = None, health_check: HookArg = None,
                 completion: HookArg = None, terminate: HookArg = None,
                 rank_assignment: Optional[Sequence[Policy]] = None,
                 host_communicators: Sequence[str] = (), set_distributed_env: bool = True,
                 **options: Any) -> None:
        self._lib = _native.library()
        self._interrupter = Interrupter()
        self._fn_exception: Optional[BaseException] = None
        self._result: Any = None
        self._keep: List[Any] = []
        self._set_env = set_distributed_env
        hooks = dict(initialize=initialize, abort=abort, finalize=finalize,
                     health_check=health_check, completion=completion, terminate=terminate)
        c_options = self._lib.resilient_restart_options_from_environment()
        if not c_options:
            raise ConfigError(_native.last_error())
        try:
            self._apply_options(c_options, options)
            self.options = _option_values(c_options)
            for kind, hook in hooks.items():
                self._set_hook(c_options, kind, _compose(kind, hook))
            # RankShouldRestart in the function's thread as the restart
            # begins, before the library aborts a communicator: a collective
            # that the abort cuts short completes (torch raises nothing with
            # the package's settings) with partial sums, which the function
            # must never see as a result.
            self._set_hook(c_options, "interrupt", lambda _state: self._interrupter.interrupt())
            if rank_assignment is not None:
                self._keep += install(c_options, rank_assignment)
            for name in host_communicators:
                check(self._lib.resilient_restart_options_add_host_communicator(
                    c_options, name.encode(), None))
            self._ptr = self._lib.resilient_restart_wrapper_create(c_options)
            if not self._ptr:
                raise ConfigError(_native.last_error())
        finally:
            self._lib.resilient_restart_options_destroy(c_options)

    def __del__(self) -> None:
        ptr = getattr(self, "_ptr", None)
        if ptr:
            self._lib.resilient_restart_wrapper_destroy(ptr)
            self._ptr = None

    def _apply_options(self, c_options: int, options: Dict[str, Any]) -> None:
        table = options_table()
        for name, value in options.items():
            if name not in table:
                raise ConfigError(f"no option {name!r} (options: {', '.join(sorted(table))})")
            spec = table[name]
            if value is None:
                continue
            if spec.string:
                rc = self._lib.resilient_restart_options_set_string(c_options, spec.id,
                                                                    str(value).encode())
            else:
                number = _milliseconds(name, value) if spec.duration else value
                if isinstance(number, bool):
                    number = int(number)
                if not isinstance(number, int):
                    raise ConfigError(f"{name}: an integer, not {value!r}")
                rc = self._lib.resilient_restart_options_set_int(c_options, spec.id, number)
            if rc != 0:
                raise error_for(rc)

    def _set_hook(self, c_options: int, kind: str, hook: Optional[Hook]) -> None:
        if hook is None:
            return

        def trampoline(c_state, _user):
            try:
                hook(State._from_c(c_state.contents, self._fn_exception))
                return 0
            except BaseException as e:  # never across the C ABI
                return _native.callback_failed(e, status_of(e))

        callback = _native.HOOK(trampoline)
        self._keep.append(callback)
        check(self._lib.resilient_restart_options_set_hook(c_options, _native.constant("hook", kind),
                                                           callback, None))

    @property
    def state(self) -> State:
        """The state of the last iteration."""
        c = _native.CState()
        check(self._lib.resilient_restart_wrapper_state(self._ptr, ctypes.byref(c)))
        return State._from_c(c, self._fn_exception)

    def timeline(self) -> List[dict]:
        """What the loop did on this rank and when (phase, iteration, mono_ns, ...)."""
        length = ctypes.c_size_t()
        check(self._lib.resilient_restart_timeline_json(self._ptr, None, 0, ctypes.byref(length)))
        buf = ctypes.create_string_buffer(length.value + 1)
        check(self._lib.resilient_restart_timeline_json(self._ptr, buf, len(buf),
                                                        ctypes.byref(length)))
        return json.loads(buf.value.decode(errors="replace"))

    def run(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Runs ``fn`` until one call completed on every active rank; returns
        that call's result (None on a spare). Raises RestartAbort when the
        job stops restarting, RankDiscarded when this rank leaves it."""
        inject = _context_parameter(fn)
        self._result = None
        self._fn_exception = None

        def call(ctx_ptr, _user):
            status = _native.status("error")
            try:
                try:
                    ctx = CallContext(ctx_ptr, self)
                    if self._set_env:
                        set_distributed_env(ctx.state)
                    call_args, call_kwargs = args, dict(kwargs)
                    if inject == 0:
                        call_args = (ctx,) + tuple(args)
                    elif inject is not None:
                        call_kwargs[inject] = ctx
                    global _current
                    _current = ctx
                    self._interrupter.enter()
                    if self._lib.resilient_restart_cancelled(ctx_ptr):
                        # The restart began before enter(): its interrupt hook
                        # found no function to stop (a CI run: a rank spun on
                        # until its hard timeout killed it).
                        raise RankShouldRestart("a restart began before the function started")
                    self._result = fn(*call_args, **call_kwargs)
                    status = _native.status("ok")
                except RankShouldRestart:
                    status = _native.status("should_restart")
                except BaseException as e:
                    if self._lib.resilient_restart_cancelled(ctx_ptr) and not isinstance(
                            e, RestartAbort):
                        # Raised after a restart began: the abort's doing (an
                        # aborted process group's error), not a fault of this rank.
                        status = _native.status("should_restart")
                        return status
                    self._fn_exception = e
                    status = _native.callback_failed(e, status_of(e))
                finally:
                    self._interrupter.leave()
                    _current = None
            except RankShouldRestart:  # delivered in this frame before leave() took its lock
                self._interrupter.leave()
                status = _native.status("should_restart")
            return status

        callback = _native.FUNCTION(call)
        check(self._lib.resilient_restart_run(self._ptr, callback, None))
        return self._result if self.state.active else None

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """As a decorator: calling the function runs it under this wrapper."""
        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            return self.run(fn, *args, **kwargs)
        return wrapped


def _context_parameter(fn: Callable[..., Any]) -> Union[None, int, str]:
    """Where the CallContext goes: 0 (the first positional parameter), a
    keyword's name, or None."""
    try:
        params = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return None
    for i, p in enumerate(params):
        ann = p.annotation
        if p.name == "call_context" or ann is CallContext or ann == "CallContext" or (
                isinstance(ann, str) and ann.endswith(".CallContext")):
            positional = p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
            return 0 if i == 0 and positional else p.name
    return None


def set_distributed_env(state: State) -> None:
    """RANK and WORLD_SIZE as torch.distributed sees an active rank: its rank
    and the world among the active ranks."""
    if state.mode == Mode.ACTIVE:
        os.environ["RANK"] = str(state.active_rank)
        os.environ["WORLD_SIZE"] = str(state.active_world_size)


