"""``Wrapper`` and ``CallWrapper`` (the reference's ``inprocess.Wrapper``,
usage guide seeds/002, restart-model.md §1.2) over nccl_resilient's restart
loop (nccl_resilient.Wrapper).

What is the reference's here: the keyword arguments and their defaults, the
hook classes, the CallWrapper injected by annotation, the automatic
heartbeat (a rank counts as progressing while its thread runs Python code),
BaseException ending the Wrapper on its rank. What is the library's: the
loop, its barriers, monitor process, store and timeouts, with the net and
profiler plugins' sub-second fault signals, spares and etcd.
"""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import functools
import inspect
import itertools
import os
import sys
import threading
import time
import typing
import warnings
from typing import Any, Callable, Dict, Iterator, Optional, Union

from .. import _native
from .. import errors as _errors
from ..errors import ConfigError
from ..wrapper import CallContext
from ..wrapper import Wrapper as _LibraryWrapper
from . import rank_assignment as _ra
from ._exchange import Binding
from ._log import logger
from .abort import AbortTorchDistributed
from .compose import Compose
from .exception import RestartAbort
from .state import FrozenState
from .store import StoreMixin, TCPStore

Duration = Union[int, float, datetime.timedelta]


def _td(seconds: float) -> datetime.timedelta:
    return datetime.timedelta(seconds=seconds)


class _Terminal(_errors.RestartError):
    """Tells the library that this rank's Wrapper ends (a BaseException in
    the function or a hook): a fault now, and the rank leaves at the
    restart, before its finalize (the reference's terminal path)."""


# ---- the automatic heartbeat ----------------------------------------------------

# The main thread's heartbeat: a pending call (run by the main thread between
# two bytecodes, Py_AddPendingCall) that is libc's sem_post on a semaphore of
# this module, so that no Python code runs there (an asynchronous
# RankShouldRestart would fire inside it). The semaphore lives as long as the
# process: a call queued when a Wrapper ends may run later.
_libc = ctypes.CDLL(None, use_errno=True)
_add_pending_call = ctypes.pythonapi.Py_AddPendingCall
_add_pending_call.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
_add_pending_call.restype = ctypes.c_int
_sem_post = ctypes.cast(_libc.sem_post, ctypes.c_void_p)
_sem_trywait = _libc.sem_trywait
_sem_trywait.argtypes = [ctypes.c_void_p]
_sem_trywait.restype = ctypes.c_int
_main_sem = ctypes.create_string_buffer(64)  # a sem_t (32 bytes on Linux x86-64 and arm64)
if _libc.sem_init(_main_sem, 0, 0) != 0:
    raise OSError(ctypes.get_errno(), "sem_init for the main thread's heartbeat")
_main_lock = threading.Lock()
_main_queued = [False]


def _main_thread_ran() -> bool:
    """Whether the main thread ran Python code since the last question (its
    pending call ran); queues the next one."""
    with _main_lock:
        ran = _sem_trywait(_main_sem) == 0
        if ran:
            while _sem_trywait(_main_sem) == 0:
                pass
            _main_queued[0] = False
        if not _main_queued[0]:
            _main_queued[0] = _add_pending_call(_sem_post, ctypes.addressof(_main_sem)) == 0
        return ran


class _Progress:
    """The reference's progress watchdog: every ``interval`` it asks whether
    the function's thread ran Python code since (the main thread: a pending
    call it runs between two bytecodes, as the reference does; another
    thread: its innermost frame moved); once the function called
    ``CallWrapper.ping()``, a ping must have come too. While both hold it
    pings the library, whose soft and hard timeouts count from the last
    ping (or NCCL's progress). A thread blocked in C, holding the GIL or
    not, or a loop that stopped pinging, is not pinged for."""

    def __init__(self, ctx: CallContext, interval: float) -> None:
        self._ctx = ctx
        self._interval = max(0.001, interval)
        self._tid = threading.get_ident()
        self._main = threading.current_thread() is threading.main_thread()
        self._manual: Optional[float] = None
        self._last_ping = time.monotonic()
        self._seen = time.monotonic()
        self._frame = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="inprocess-progress", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join()

    def manual(self) -> None:
        now = time.monotonic()
        self._manual = now
        self._seen = now

    def _ran(self) -> float:
        if self._main:
            if _main_thread_ran():
                self._seen = time.monotonic()
            return self._seen
        frame = sys._current_frames().get(self._tid)
        sample = (id(frame), frame.f_lasti if frame is not None else -1)
        if sample != self._frame:
            self._frame = sample
            self._seen = time.monotonic()
        return self._seen

    def _run(self) -> None:
        # stop() sets the event and then waits for this thread: the context
        # is valid whenever the event is not set.
        while not self._stop.wait(self._interval):
            if self._ctx.cancelled:
                return
            ran = self._ran()
            if ran > self._last_ping and (self._manual is None or self._manual > self._last_ping):
                self._last_ping = time.monotonic()
                self._ctx.ping()


class CallWrapper:
    """What the wrapped function gets in a parameter annotated CallWrapper
    (Optional[CallWrapper] too): ``iteration``, ``ping()`` (arms the manual
    heartbeat: from then on a ping must come within the soft timeout),
    ``atomic()`` (a section the restart never interrupts) and
    ``disable_hang_protection()``. Beyond the reference: ``state`` and
    ``context`` (nccl_resilient's CallContext: host communicators, NCCL
    communicator watch, collective marks)."""

    def __init__(self, ctx: CallContext, progress: _Progress) -> None:
        self._ctx_ = ctx
        self._progress = progress
        self._valid = True

    @property
    def _ctx(self) -> CallContext:
        if not self._valid:
            raise _errors.RestartError("this CallWrapper belongs to a call of the wrapped "
                                       "function that has ended")
        return self._ctx_

    @property
    def iteration(self) -> int:
        return self._ctx.iteration

    @property
    def state(self) -> FrozenState:
        return self._ctx.state

    @property
    def context(self) -> CallContext:
        return self._ctx

    def ping(self) -> None:
        ctx = self._ctx
        self._progress.manual()
        ctx.ping()

    @contextlib.contextmanager
    def atomic(self) -> Iterator[None]:
        with self._ctx.atomic():
            yield

    @contextlib.contextmanager
    def disable_hang_protection(self) -> Iterator[None]:
        with self._ctx.disable_hang_protection():
            yield


def _is_call_wrapper(annotation: Any) -> bool:
    if annotation is CallWrapper:
        return True
    if isinstance(annotation, str):
        text = annotation.replace(" ", "")
        return text in ("CallWrapper", "inprocess.CallWrapper", "Optional[CallWrapper]",
                        "typing.Optional[CallWrapper]", "Optional[inprocess.CallWrapper]",
                        "CallWrapper|None", "None|CallWrapper", "inprocess.CallWrapper|None",
                        "Union[CallWrapper,None]") or text.endswith(".CallWrapper") or (
            "CallWrapper" in text and ("Optional[" in text or "|None" in text))
    return any(_is_call_wrapper(a) for a in typing.get_args(annotation))


def _injection(fn: Callable[..., Any]) -> Optional[inspect.Parameter]:
    """The parameter annotated CallWrapper (or Optional[CallWrapper])."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable names: the annotations' text
        hints = {}
    for p in signature.parameters.values():
        if _is_call_wrapper(hints.get(p.name, p.annotation)):
            return p
    return None


_ARGUMENTS = {
    # the reference's argument: (the library's option, its default in seconds)
    "monitor_thread_interval": ("monitor_thread_interval", 1.0),
    "monitor_process_interval": ("monitor_process_interval", 1.0),
    "heartbeat_interval": ("heartbeat_interval", 1.0),
    "progress_watchdog_interval": ("progress_watchdog_interval", 1.0),
    "soft_timeout": ("soft_timeout", 60.0),
    "hard_timeout": ("hard_timeout", 90.0),
    "heartbeat_timeout": ("heartbeat_timeout", 30.0),
    "barrier_timeout": ("barrier_timeout", 120.0),
    "completion_timeout": ("completion_timeout", 120.0),
    "termination_grace_time": ("termination_grace_time", 5.0),
}
_DEFAULT = object()


def _seconds(name: str, value: Duration) -> float:
    if isinstance(value, datetime.timedelta):
        return value.total_seconds()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise ConfigError(f"{name}: a timedelta (or seconds), not {value!r}")


class Wrapper:
    """Runs the decorated function until one call completed on every active
    rank, restarting it in-process after a fault anywhere in the job (the
    reference's Wrapper; see the module's text and docs/python.md, "Coming
    from nvidia-resiliency-ext"). Keyword-only arguments, the reference's
    defaults; a duration not given takes its NCCL_RESILIENT_RESTART_* knob
    where the environment sets one. ``resilient_options``: options of
    nccl_resilient beyond the reference's (``nccl_resilient.options()``).
    ``rank_filter``: the reference's deprecated filter step, run after
    ``rank_assignment``."""

    def __init__(self, *, store_factory: type = TCPStore, store_kwargs: Optional[dict] = None,
                 initialize: Optional[Callable] = None,
                 abort: Optional[Callable] = _DEFAULT,  # type: ignore[assignment]
                 finalize: Optional[Callable] = None, health_check: Optional[Callable] = None,
                 rank_assignment: Optional[Callable] = _DEFAULT,  # type: ignore[assignment]
                 monitor_thread_interval: Duration = _td(1),
                 monitor_process_interval: Duration = _td(1),
                 heartbeat_interval: Duration = _td(1),
                 progress_watchdog_interval: Duration = _td(1),
                 soft_timeout: Duration = _td(60), hard_timeout: Duration = _td(90),
                 heartbeat_timeout: Duration = _td(30), barrier_timeout: Duration = _td(120),
                 completion_timeout: Duration = _td(120), last_call_wait: Duration = _td(1),
                 termination_grace_time: Duration = _td(5),
                 monitor_process_logfile: Optional[str] = None,
                 monitor_process_pidfile: Optional[str] = None,
                 enabled: bool = True, completion: Optional[Callable] = None,
                 terminate: Optional[Callable] = None, rank_filter: Optional[Callable] = None,
                 resilient_options: Optional[Dict[str, Any]] = None) -> None:
        given = {k: v for k, v in locals().items() if k in _ARGUMENTS}
        if not (isinstance(store_factory, type) and issubclass(store_factory, StoreMixin)):
            raise ConfigError(
                f"store_factory {store_factory!r} is not an inprocess.store.StoreMixin subclass: "
                "the restart loop speaks to its store natively, so a store here names one it "
                "can reach (TCPStore, ResilientStore, or a subclass of yours that sets "
                "resilient_url and hosts)")
        self.store_factory = store_factory
        self.store_kwargs = dict(store_kwargs or {})
        self.initialize = initialize
        self.abort = AbortTorchDistributed() if abort is _DEFAULT else abort
        self.finalize = finalize
        self.health_check = health_check
        if rank_assignment is _DEFAULT:
            rank_assignment = Compose(_ra.ActivateAllRanks(), _ra.ShiftRanks())
        if rank_filter is not None:
            warnings.warn("Wrapper(rank_filter=...) is deprecated: compose the filters into "
                          "rank_assignment (they run after it)", DeprecationWarning, stacklevel=2)
            rank_assignment = Compose(rank_filter, rank_assignment)
        self.rank_assignment = rank_assignment
        self.completion = completion
        self.terminate = terminate
        self.enabled = bool(enabled)
        self.last_call_wait = _seconds("last_call_wait", last_call_wait)
        if self.last_call_wait < 0:
            raise ConfigError(f"last_call_wait {self.last_call_wait:g} s is negative")
        for name, hook in (("initialize", initialize), ("abort", self.abort),
                           ("finalize", finalize), ("health_check", health_check),
                           ("completion", completion), ("terminate", terminate),
                           ("rank_assignment", rank_assignment)):
            if hook is not None and not callable(hook):
                raise ConfigError(f"{name}: {hook!r} is not callable")
        self.resilient_options = dict(resilient_options or {})
        clash = set(self.resilient_options) & {"store_url", "host_store", "rank", "world_size"}
        if clash:
            raise ConfigError(f"resilient_options: {sorted(clash)} come from store_factory and "
                              "the environment (RANK, WORLD_SIZE)")
        table = _native_options()
        self._options: Dict[str, Any] = {}
        for name, (option, default) in _ARGUMENTS.items():
            value = given[name]
            explicit = not (isinstance(value, datetime.timedelta)
                            and value == _td(default))
            knob = table[option].knob
            if explicit or not (knob and knob in os.environ):
                self._options[option] = _seconds(name, value)
        if monitor_process_logfile:
            self._options["monitor_log_file"] = monitor_process_logfile
        if monitor_process_pidfile:
            self._options["monitor_pid_file"] = monitor_process_pidfile
        # The reference restarts every healthy rank after a soft timeout, the
        # slow one too; the library would replace a named culprit by a spare.
        self._options["terminate_culprits"] = False
        self._options.update(self.resilient_options)
        # The library's checks of the options (soft < hard < barrier, ...),
        # now rather than at the first call.
        _LibraryWrapper(**dict(self._options, store_url="memory", rank=0, world_size=1,
                               use_monitor_process=False))
        self._calls = itertools.count()
        self._initial: Optional[tuple] = None
        self._library: Optional[_LibraryWrapper] = None
        self.log = logger()

    # -- the library's view of the hooks --------------------------------------

    def _hook(self, kind: str, hook: Optional[Callable], call: "_Call") -> Callable:
        def run(state) -> None:
            if kind in ("finalize", "health_check") and call.terminal is not None:
                raise _Terminal(f"this rank's Wrapper ends: {call.terminal!r}")
            if hook is None:
                return
            try:
                hook(state)
            except RestartAbort as e:
                if kind != "initialize":
                    call.terminal = e
                    raise _Terminal(repr(e)) from None
                call.terminal = e  # every rank alike (RetryController): the job ends
                raise _errors.RestartAbort(str(e)) from None
            except Exception as e:
                if kind in ("finalize", "health_check"):
                    call.hook_failure = e
                raise
            except BaseException as e:  # SystemExit, KeyboardInterrupt, ...
                if isinstance(e, _errors.RankShouldRestart):
                    raise
                call.terminal = e
                raise _Terminal(repr(e)) from None
        return run

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        parameter = _injection(fn)

        @functools.wraps(fn)
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            return _Call(self, fn, parameter).run(args, kwargs)
        return wrapped

    @property
    def state(self) -> Optional[FrozenState]:
        """The state of the last iteration of the last call."""
        return self._library.state if self._library is not None else None

    def timeline(self) -> list:
        """What the restart loop did on this rank in the last call."""
        return self._library.timeline() if self._library is not None else []


def _native_options():
    from ..wrapper import options_table
    return options_table()


class _Call:
    """One call of the wrapped function under the Wrapper."""

    def __init__(self, wrapper: Wrapper, fn: Callable[..., Any],
                 parameter: Optional[inspect.Parameter]) -> None:
        self.wrapper = wrapper
        self.fn = fn
        self.parameter = parameter
        self.terminal: Optional[BaseException] = None
        self.hook_failure: Optional[BaseException] = None

    def _initial(self) -> tuple:
        w = self.wrapper
        if w._initial is None:
            try:
                w._initial = (int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
            except (KeyError, ValueError) as e:
                raise ConfigError(f"the Wrapper reads its rank from RANK and WORLD_SIZE: {e}")
        return w._initial

    def _inject(self, args, kwargs, cw: CallWrapper):
        p = self.parameter
        if p is None:
            return args, kwargs
        if p.kind == p.POSITIONAL_ONLY:
            index = list(inspect.signature(self.fn).parameters).index(p.name)
            args = tuple(args[:index]) + (cw,) + tuple(args[index:])
        else:
            kwargs = dict(kwargs, **{p.name: cw})
        return args, kwargs

    def run(self, args, kwargs) -> Any:
        w = self.wrapper
        dist = sys.modules.get("torch.distributed")
        if dist is not None and dist.is_available() and dist.is_initialized():
            raise ConfigError("torch.distributed is initialized before the Wrapper's function "
                              "is entered: initialize it inside the function, which runs again "
                              "on every restart (usage guide, Requirements)")
        rank, world = self._initial()
        number = next(w._calls)
        interval = w._options.get("progress_watchdog_interval", 1.0)
        options = dict(w._options, rank=rank, world_size=world)

        def function(ctx: CallContext):
            progress = _Progress(ctx, interval)
            call_wrapper = CallWrapper(ctx, progress)
            try:
                progress.start()
                call_args, call_kwargs = self._inject(args, kwargs, call_wrapper)
                return self.fn(*call_args, **call_kwargs)
            except (Exception, _errors.RankShouldRestart):
                raise
            except BaseException as e:  # the reference's terminal path, this rank only
                self.terminal = e
                if ctx.cancelled:
                    raise
                raise _Terminal(f"{type(e).__name__}: {e}") from None
            finally:
                # The context dies with the call: the watchdog must be gone
                # first, even when RankShouldRestart arrives while it stops.
                arrived = None
                while True:
                    try:
                        call_wrapper._valid = False
                        progress.stop()
                        break
                    except BaseException as e:  # noqa: B012 - raised below
                        arrived = arrived or e
                if arrived is not None:
                    raise arrived

        if not w.enabled:
            library = _LibraryWrapper(**dict(options, enabled=False, store_url="memory",
                                             use_monitor_process=False))
            w._library = library
            return library.run(function)

        store = w.store_factory(**w.store_kwargs)
        if not isinstance(store, StoreMixin) or not store.resilient_url:
            raise ConfigError(f"store_factory gave {store!r}, not a StoreMixin naming a store of "
                              "the library (resilient_url)")
        expected = getattr(store, "world_size", 0)
        if isinstance(store, TCPStore) and expected and expected != world:
            raise ConfigError(f"TCPStore(world_size={expected}) but the job has {world} ranks "
                              "(WORLD_SIZE)")
        options.update(store_url=store.resilient_url, host_store=bool(store.hosts))
        if number > 0:  # a job id of its own for each later call of the function
            job = options.get("job_id") or os.environ.get("NCCL_RESILIENT_RESTART_JOB", "default")
            options["job_id"] = f"{job}-call{number}"
        w._library = None  # the previous call's store server (rank 0) goes first
        holder: Dict[str, _LibraryWrapper] = {}
        barrier = _seconds("barrier_timeout", options.get("barrier_timeout", 120.0))
        binding = Binding(store.prefixed(f"nccl_resilient/inprocess/{options.get('job_id', '')}"
                                         f"/{number}"),
                          rank, world, barrier, lambda: holder["library"].state)
        policies = (_ra.library_policies(w.rank_assignment, binding)
                    if w.rank_assignment is not None else None)
        hooks = {kind: self.wrapper._hook(kind, getattr(w, kind), self)
                 for kind in ("initialize", "abort", "finalize", "health_check", "completion",
                              "terminate")}
        library = _LibraryWrapper(rank_assignment=policies, **hooks, **options)
        holder["library"] = library
        w._library = library
        completed = False
        try:
            out = library.run(function)
            completed = True
            return out
        except BaseException as e:
            if self.terminal is not None:
                raise self.terminal.with_traceback(self.terminal.__traceback__) from None
            if self.hook_failure is not None:
                raise self.hook_failure from None
            if isinstance(e, _errors.RestartAbort):
                raise RestartAbort(str(e)) from e
            raise
        finally:
            self._leave(binding.store, library, completed, store.hosts and rank == 0,
                        barrier + _seconds("heartbeat_timeout",
                                           options.get("heartbeat_timeout", 30.0)))

    def _leave(self, store: StoreMixin, library: _LibraryWrapper, completed: bool,
               serving: bool, bound: float) -> None:
        """Says in the store that this rank's Wrapper ended; where this
        process serves the store (rank 0 of a TCPStore, as the reference's),
        serves on until every rank of the last World has ended too (the
        reference's rank 0 waits at its termination barrier for the same
        reason), at most ``bound`` seconds."""
        try:
            size = library.state.world_size
            if completed:
                store.set("end", str(size))
                store.add("completed", 1)
            else:
                store.add("left", 1)
            if not serving:
                return
            deadline = time.monotonic() + bound
            while time.monotonic() < deadline:
                done = store.add("completed", 0)
                if store.check(["end"]):
                    if done >= int(store.get("end").decode()):
                        return
                elif done + store.add("left", 0) >= size:
                    return
                time.sleep(0.05)
            logger().warning("the store this rank serves stops after %g s although ranks of the "
                             "job may still use it", bound)
        except Exception as e:  # the store is gone: nothing to serve, nobody to tell
            logger().debug("leaving the Wrapper: %s", e)


__all__ = ["CallWrapper", "Wrapper"]
