"""A new user's path: ``pip install`` of python/ into a fresh virtual
environment, then a job from outside the repository, with a monitor process
(the package's own copy of resilient-monitor, beside its library)."""

import os
import subprocess
import sys
import textwrap

import pytest

from conftest import BUILD, REPO


def test_pip_install_and_run(tmp_path, store_url, base_env):
    venv = tmp_path / "venv"
    try:
        subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                       check=True, capture_output=True, timeout=120)
    except subprocess.CalledProcessError as e:
        pytest.fail(f"python3 -m venv failed (python3-venv missing?): {e.stderr.decode()}")
    pip = subprocess.run([str(venv / "bin" / "pip"), "install", "--no-build-isolation",
                          os.path.join(REPO, "python")],
                         env=dict(base_env, BUILD_DIR=BUILD), capture_output=True, text=True,
                         timeout=300)
    assert pip.returncode == 0, pip.stdout + pip.stderr
    script = textwrap.dedent("""
        import nccl_resilient as nr, nccl_resilient._native as native
        where = native.library_dir()
        assert "site-packages" in str(where), where
        w = nr.Wrapper(rank=0, world_size=1, soft_timeout=5, hard_timeout=8)
        print("result", w.run(lambda call_context: call_context.world_size + 6))
        import nccl_resilient.inprocess as inprocess
        assert "site-packages" in inprocess.__file__, inprocess.__file__
    """)
    env = {k: v for k, v in base_env.items() if k not in ("PYTHONPATH", "BUILD_DIR")}
    env.update(NCCL_RESILIENT_STORE_URL=store_url, NCCL_RESILIENT_RESTART_JOB="install-check")
    run = subprocess.run([str(venv / "bin" / "python"), "-c", script], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0 and "result 7" in run.stdout, run.stdout + run.stderr
