"""A client of the job's store (tcp://, etcd:// or memory; the C API's
resilient_restart_store_*), with key prefixes.

Every call releases the GIL while it waits. Timeouts are seconds (or a
timedelta); None is the store's default.
"""

from __future__ import annotations

import ctypes
import datetime
import os
from typing import List, Optional, Sequence, Union

from . import _native
from .errors import ConfigError, check, error_for

Timeout = Union[None, int, float, datetime.timedelta]


def _ms(timeout: Timeout) -> int:
    if timeout is None:
        return -1
    if isinstance(timeout, datetime.timedelta):
        return max(0, int(timeout.total_seconds() * 1000))
    return max(0, int(float(timeout) * 1000))


def _bytes(value: Union[bytes, bytearray, str, Sequence[int]]) -> bytes:
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


class _Connection:
    """One open store handle, shared by the views made from it."""

    def __init__(self, url: str, timeout: Timeout) -> None:
        self.lib = _native.library()
        self.url = url
        self.ptr = self.lib.resilient_restart_store_open(url.encode(), _ms(timeout))
        if not self.ptr:
            raise error_for(_native.status("error"))

    def __del__(self) -> None:
        ptr = getattr(self, "ptr", None)
        if ptr:
            self.lib.resilient_restart_store_close(ptr)
            self.ptr = None

    def take(self, pointer: ctypes.c_void_p, length: ctypes.c_size_t) -> bytes:
        try:
            return ctypes.string_at(pointer.value, length.value) if pointer.value else b""
        finally:
            self.lib.resilient_restart_free(pointer)


class Store:
    """The job's store under a key prefix (``prefix`` ends with "/", or is empty)."""

    def __init__(self, url: Optional[str] = None, timeout: Timeout = None, prefix: str = "",
                 *, _connection: Optional[_Connection] = None) -> None:
        if _connection is None:
            url = url or os.environ.get("NCCL_RESILIENT_STORE_URL", "")
            if not url:
                raise ConfigError("no store URL: pass one or set NCCL_RESILIENT_STORE_URL")
            _connection = _Connection(url, timeout)
        self._c = _connection
        self.prefix = prefix

    @property
    def url(self) -> str:
        return self._c.url

    def view(self, prefix: str) -> "Store":
        """A view of the keys under ``prefix`` (relative to this one)."""
        if prefix and not prefix.endswith("/"):
            prefix += "/"
        return Store(prefix=self.prefix + prefix, _connection=self._c)

    def _key(self, key: str) -> bytes:
        return (self.prefix + key).encode()

    def set(self, key: str, value, timeout: Timeout = None) -> None:
        data = _bytes(value)
        check(self._c.lib.resilient_restart_store_set(self._c.ptr, self._key(key), data, len(data),
                                                      _ms(timeout)))

    def get(self, key: str, timeout: Timeout = None) -> Optional[bytes]:
        """The value, or None when the key is absent (does not wait)."""
        p, n, found = ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_int()
        check(self._c.lib.resilient_restart_store_get(self._c.ptr, self._key(key), ctypes.byref(p),
                                                      ctypes.byref(n), ctypes.byref(found),
                                                      _ms(timeout)))
        value = self._c.take(p, n)
        return value if found.value else None

    def add(self, key: str, delta: int, timeout: Timeout = None) -> int:
        out = ctypes.c_longlong()
        check(self._c.lib.resilient_restart_store_add(self._c.ptr, self._key(key), int(delta),
                                                      ctypes.byref(out), _ms(timeout)))
        return out.value

    def compare_set(self, key: str, expected: Optional[bytes], desired,
                    timeout: Timeout = None) -> tuple:
        """If the value equals ``expected`` (None: the key is absent) store
        ``desired``. Returns (swapped, value now stored or None)."""
        want = _bytes(desired)
        exp = b"" if expected is None else _bytes(expected)
        swapped, p, n, found = ctypes.c_int(), ctypes.c_void_p(), ctypes.c_size_t(), ctypes.c_int()
        check(self._c.lib.resilient_restart_store_compare_set(
            self._c.ptr, self._key(key), exp, len(exp), 1 if expected is None else 0, want,
            len(want), ctypes.byref(swapped), ctypes.byref(p), ctypes.byref(n),
            ctypes.byref(found), _ms(timeout)))
        value = self._c.take(p, n)
        return bool(swapped.value), (value if found.value else None)

    def _keys(self, keys: Sequence[str]):
        array = (ctypes.c_char_p * max(len(keys), 1))(*[self._key(k) for k in keys])
        return array, len(keys)

    def wait(self, keys: Sequence[str], timeout: Timeout = None) -> None:
        """Until every key exists (TimeoutError after ``timeout``)."""
        array, n = self._keys(keys)
        check(self._c.lib.resilient_restart_store_wait(self._c.ptr, array, n, _ms(timeout)))

    def check(self, keys: Sequence[str], timeout: Timeout = None) -> bool:
        array, n = self._keys(keys)
        present = ctypes.c_int()
        check(self._c.lib.resilient_restart_store_check(self._c.ptr, array, n,
                                                        ctypes.byref(present), _ms(timeout)))
        return bool(present.value)

    def delete(self, key: str, timeout: Timeout = None) -> bool:
        existed = ctypes.c_int()
        check(self._c.lib.resilient_restart_store_delete(self._c.ptr, self._key(key),
                                                         ctypes.byref(existed), _ms(timeout)))
        return bool(existed.value)

    def delete_prefix(self, prefix: str = "", timeout: Timeout = None) -> int:
        removed = ctypes.c_longlong()
        check(self._c.lib.resilient_restart_store_delete_prefix(
            self._c.ptr, self._key(prefix), ctypes.byref(removed), _ms(timeout)))
        return removed.value


def keys_list(keys: Union[str, Sequence[str]]) -> List[str]:
    return [keys] if isinstance(keys, str) else list(keys)
