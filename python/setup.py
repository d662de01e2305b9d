"""Packaging of nccl_resilient: the pure-Python package plus, in its _lib
directory, the native files it drives, copied from a build of this
repository (BUILD_DIR, default ../build): libresilient-restart.so, the
monitor executable and the net plugin found beside it."""

import os
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
NATIVE = ["libresilient-restart.so", "resilient-monitor", "libnccl-net-resilient.so"]


def build_dir() -> Path:
    given = os.environ.get("BUILD_DIR")
    if given:
        path = Path(given)
        return path if path.is_absolute() else HERE.parent / path
    return HERE.parent / "build"


class BuildWithNative(build_py):
    def run(self):
        super().run()
        source = build_dir() / "restart"
        missing = [n for n in NATIVE if not (source / n).exists()]
        if missing:
            raise SystemExit(f"nccl_resilient: {', '.join(missing)} not in {source}: build the "
                             "project first (meson setup build && ninja -C build), or set "
                             "BUILD_DIR to the build directory")
        target = Path(self.build_lib) / "nccl_resilient" / "_lib"
        target.mkdir(parents=True, exist_ok=True)
        for name in NATIVE:
            # Copies of the files the build's links point at (the library's
            # soname link is not needed: it is loaded by its path).
            shutil.copy2((source / name).resolve(), target / name)


setup(cmdclass={"build_py": BuildWithNative})
