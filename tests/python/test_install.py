"""A new user's path (issue 35): ``pip install .`` at the repository root,
into a fresh virtual environment, builds the restart library, the plugins,
resilient-monitor and the tools with Meson through meson-python (no build
before it) and installs them inside the package; then a training script
written against the reference restarter's API runs from outside the tree,
on that environment's Python only.

The environment sees Debian's site packages (--system-site-packages): where
PyPI is out of reach they provide the build backend (python3-mesonpy, hence
--no-build-isolation) and torch; nothing of this repository is on its path.
"""

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO
from inprocess_jobs import run_ranks

PACKAGE = os.path.join(REPO, "python", "nccl_resilient")
NATIVE = {"libresilient-restart.so", "resilient-monitor", "libnccl-net-resilient.so",
          "libnccl-profiler-resilient.so"}


def _outside_env(base_env):
    """The job's environment without anything that points into the tree."""
    return {k: v for k, v in base_env.items() if k not in ("PYTHONPATH", "BUILD_DIR")}


@pytest.fixture(scope="module")
def venv(base_env, tmp_path_factory):
    root = tmp_path_factory.mktemp("install")
    venv = root / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                          capture_output=True, text=True, timeout=120)
    assert made.returncode == 0, f"python3 -m venv failed (python3-venv missing?): {made.stderr}"
    # As on a new user's machine: no compiler cache (Meson would use ccache
    # when installed, and this checkout's earlier builds would fill the wheel).
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation", "."],
                         cwd=REPO, env=dict(_outside_env(base_env), CCACHE_DISABLE="1"),
                         capture_output=True, text=True, timeout=1500)
    assert pip.returncode == 0, pip.stdout[-6000:] + pip.stderr[-6000:]
    site = subprocess.run([str(venv / "bin" / "python"), "-c",
                           "import sysconfig; print(sysconfig.get_paths()['platlib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    return venv, root, site


def test_the_package_holds_every_module_and_its_native_files(venv):
    path, _, site = venv
    installed = os.path.join(site, "nccl_resilient")
    # Every module of the source package, and only those (python/meson.build
    # lists them).
    def modules(top):
        return sorted(os.path.relpath(os.path.join(d, f), top) for d, _, files in os.walk(top)
                      for f in files if f.endswith(".py"))
    assert modules(installed) == modules(PACKAGE)
    lib = os.path.join(installed, "_lib")
    assert set(os.listdir(lib)) == NATIVE
    assert os.stat(os.path.join(lib, "resilient-monitor")).st_mode & stat.S_IXUSR
    info = [os.path.join(site, d) for d in os.listdir(site)
            if d.startswith("nccl_resilient-") and d.endswith(".dist-info")]
    assert len(info) == 1, os.listdir(site)
    # The optional torch extra.
    with open(os.path.join(info[0], "METADATA")) as f:
        assert "Provides-Extra: torch" in f.read()
    # For any CPython 3 of the platform (the native files are loaded with
    # ctypes, no extension module), not only the one that built the wheel.
    with open(os.path.join(info[0], "WHEEL")) as f:
        tags = [line.split(":", 1)[1].strip() for line in f if line.startswith("Tag:")]
    assert tags and all(t.startswith("py3-none-linux_") for t in tags), tags


def test_the_installed_library_runs_a_wrapped_function(venv, base_env, store_url):
    path, root, _ = venv
    script = textwrap.dedent("""
        import nccl_resilient as nr, nccl_resilient._native as native
        where = str(native.library_dir())
        assert "site-packages" in where and where.endswith("_lib"), where
        w = nr.Wrapper(rank=0, world_size=1, soft_timeout=5, hard_timeout=8)
        print("result", w.run(lambda call_context: call_context.world_size + 6))
    """)
    env = dict(_outside_env(base_env), NCCL_RESILIENT_STORE_URL=store_url,
               NCCL_RESILIENT_RESTART_JOB="install-check")
    run = subprocess.run([str(path / "bin" / "python"), "-c", script], cwd=root, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "result 7" in run.stdout, run.stdout + run.stderr


def test_the_tools_are_the_environments_commands(venv, base_env):
    path, root, _ = venv
    for tool in ("resilient-run", "resilient-store", "resilient-config", "resilient-report"):
        run = subprocess.run([str(path / "bin" / tool), "--help"], cwd=root,
                             env=_outside_env(base_env), capture_output=True, text=True,
                             timeout=60)
        assert run.returncode == 0 and "usage" in (run.stdout + run.stderr).lower(), \
            (tool, run.stdout, run.stderr)


def test_a_reference_script_recovers_from_outside_the_tree(venv, base_env, tmp_path):
    # inprocess_train.py: written against nvidia-resiliency-ext's documented
    # API, its one import of the restarter `import nccl_resilient.inprocess`.
    path, _, _ = venv
    python = path / "bin" / "python"
    script = tmp_path / "train.py"
    shutil.copy(os.path.join(os.path.dirname(__file__), "inprocess_train.py"), script)
    env = dict(_outside_env(base_env), TRAIN_STEPS="8", TRAIN_ACTIVE="3")
    clean = tmp_path / "fault_free"
    clean.mkdir()
    job = run_ranks(env, clean, str(script), 3, 90, python=python)
    for r in range(3):
        assert job.outcome(r) == "completed", (r, job.results.get(r), job.log(r))
    fault_free = json.loads((clean / "final.json").read_text())
    # An exception in rank 1 at step 2, a SIGKILL of rank 2 at step 4, a
    # SIGSTOP of rank 3 (the reserve that took rank 2's place) at step 6.
    faulty = tmp_path / "faults"
    faulty.mkdir()
    env["TRAIN_FAULTS"] = "exception:1@2,sigkill:2@4,sigstop:3@6"
    job = run_ranks(env, faulty, str(script), 5, 120, python=python)
    assert job.returncodes[2] == -signal.SIGKILL
    assert job.returncodes[3] in (-signal.SIGKILL, -signal.SIGTERM)
    for r in (0, 1, 4):
        assert job.outcome(r) == "completed", (r, job.results.get(r), job.log(r))
        assert job.results[r]["returned"] == fault_free
