"""core.gitcli's CatFile reads objects through one ``git cat-file --batch`` on every OS:
started with ``os.posix_spawnp`` where the OS has it (Linux, macOS), through
``subprocess`` where it does not (Windows), and both read the same."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from gitrelay.core.gitcli import CatFile
from tests.kit import git, git_env


@pytest.mark.parametrize("spawn", ["posix_spawnp", "subprocess"])
def test_catfile_reads_objects_however_git_is_started(tmp_path: Path, spawn: str,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "r.git"
    git("init", "--bare", "-q", str(repo))
    oid = git("hash-object", "-w", "--stdin", git_dir=repo, input=b"hello\n").stdout.decode()
    if spawn == "subprocess":
        monkeypatch.delattr(os, "posix_spawnp", raising=False)  # as on Windows
    elif not hasattr(os, "posix_spawnp"):
        pytest.skip("this OS has no posix_spawnp (Windows)")
    with CatFile(repo, env=git_env()) as cat:
        assert cat.read(oid.strip()) == ("blob", b"hello\n")
        assert cat.read("0" * 40) is None
        assert cat.resolve(oid.strip()) == oid.strip()
