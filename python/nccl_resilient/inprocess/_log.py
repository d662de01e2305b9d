"""The package's logger, as the reference's Wrapper logs (usage guide,
Logging): a StreamHandler of its own on stderr, not propagated to the
root logger's handlers, no file."""

from __future__ import annotations

import logging
import sys

_NAME = "nccl_resilient.inprocess"


def logger() -> logging.Logger:
    log = logging.getLogger(_NAME)
    if not log.handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.propagate = False
        if log.level == logging.NOTSET:
            log.setLevel(logging.INFO)
    return log
