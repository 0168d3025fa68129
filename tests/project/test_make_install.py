"""`make install`: one command from a clone to a `gitrelay` on PATH, run as a new user would
(a home of the test's own, no pipx, no uv, no coding host)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.kit import hermetic_env

pytestmark = pytest.mark.slow  # a real pip install of the tree into a new virtualenv

ROOT = Path(__file__).resolve().parents[2]


def test_make_install_links_a_working_gitrelay_and_runs_setup(tmp_path):
    if shutil.which("make") is None:
        pytest.skip("make is not installed on this machine")
    home = tmp_path / "home"
    home.mkdir()
    # No host, no pipx, no uv on PATH: the venv-and-link way, and setup finding nothing.
    path = os.pathsep.join(["/usr/local/bin", "/usr/bin", "/bin"])
    env = hermetic_env(home, PATH=path, GITRELAY_INSTALL_WITH="venv",
                       PIP_CACHE_DIR=str(Path.home() / ".cache" / "pip")
                       if "PIP_CACHE_DIR" not in os.environ else os.environ["PIP_CACHE_DIR"])
    proc = subprocess.run(["make", "-s", "install"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    link = home / ".local" / "bin" / "gitrelay"
    assert link.is_symlink()
    assert f'export PATH="{link.parent}:$PATH"' in proc.stdout  # it says how to reach it
    assert "no coding host found to set up" in proc.stdout
    ran = subprocess.run([str(link), "docs", "getting-started", "--path"], env=env,
                         capture_output=True, text=True, timeout=60, check=False)
    assert ran.returncode == 0, ran.stderr
    # The docs came with the install (not from this source tree).
    page = Path(ran.stdout.strip())
    assert str(home) in str(page.resolve())
    assert page.read_bytes() == (ROOT / "docs" / "getting-started.md").read_bytes()
