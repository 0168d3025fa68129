"""The shell shim in hooks/pre-receive, installed by hand as docs/deploying.md says:
pointed at the python of a virtualenv gitrelay is installed in, it runs the gate."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from tests.kit import ALICE, DAVE, Bench, standard_bench

ROOT = Path(__file__).resolve().parent.parent.parent
SHIM = ROOT / "hooks" / "pre-receive"


def virtualenv_with_gitrelay(where: Path) -> Path:
    """A fresh virtualenv in which gitrelay is installed the way ``pip install -e`` does
    it (a .pth file naming the source tree); returns its python."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(where)], check=True,
                   capture_output=True, timeout=120)
    python = where / "bin" / "python"
    purelib = subprocess.run([str(python), "-c",
                              "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "gitrelay-source.pth").write_text(f"{ROOT}\n")
    return python


def install_shim(bench: Bench) -> None:
    hook = bench.relay / "hooks" / "pre-receive"
    shutil.copy(SHIM, hook)
    hook.chmod(0o755)


def test_the_shim_runs_the_gate_with_a_virtualenvs_python(tmp_path: Path) -> None:
    # As a new user would: a virtualenv with gitrelay in it, the shim copied into the
    # relay, GITRELAY_PYTHON set to the virtualenv's python.
    python = virtualenv_with_gitrelay(tmp_path / "venv")
    bench = standard_bench(tmp_path / "bench")
    install_shim(bench)
    env = {"GITRELAY_PYTHON": str(python)}

    bench.register(DAVE)
    assert bench.push_main(env).accepted  # a valid registration goes through

    bench.register(ALICE)  # alice is registered already
    refused = bench.push_main(env)
    assert not refused.accepted
    assert refused.rules, refused.stderr  # refused by a named rule of the gate ...
    assert "ModuleNotFoundError" not in refused.stderr  # ... not by a missing package
    assert "Traceback" not in refused.stderr


def test_the_shim_and_the_hook_init_installs_refuse_the_same_push(tmp_path: Path) -> None:
    python = virtualenv_with_gitrelay(tmp_path / "venv")
    by_init = standard_bench(tmp_path / "init")
    by_hand = by_init.copy(tmp_path / "hand")
    install_shim(by_hand)
    verdicts = []
    for bench in (by_init, by_hand):
        bench.register(ALICE)
        verdicts.append(bench.push_main({"GITRELAY_PYTHON": str(python)}).refusals)
    assert verdicts[0] and verdicts[0] == verdicts[1]


def test_the_shims_python_ignores_the_pushers_python_variables(tmp_path: Path) -> None:
    python = virtualenv_with_gitrelay(tmp_path / "venv")
    bench = standard_bench(tmp_path / "bench")
    install_shim(bench)
    decoy = tmp_path / "decoy"
    (decoy / "gitrelay" / "gate").mkdir(parents=True)
    for package in (decoy / "gitrelay", decoy / "gitrelay" / "gate"):
        (package / "__init__.py").write_text("")
    (decoy / "gitrelay" / "gate" / "gate.py").write_text("def run():\n    raise SystemExit(0)\n")
    bench.register(ALICE)
    result = bench.push_main({"GITRELAY_PYTHON": str(python), "PYTHONPATH": str(decoy)})
    assert not result.accepted and result.rules  # the real gate ran, not the decoy


def test_the_shim_in_the_source_tree_is_executable() -> None:
    assert os.access(SHIM, os.X_OK)  # git skips a hook it cannot execute, silently
