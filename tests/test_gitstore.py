"""Store.tree_with writes trees itself: git must read them as it writes them."""

from __future__ import annotations

import subprocess
from pathlib import Path

from gitrelay.gitstore import Store


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(repo), *args], capture_output=True,
                          text=True, check=True).stdout


def test_trees_built_file_by_file_are_what_git_builds(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.git", create=True)
    # Names chosen for git's ordering: a directory sorts as if it ended in "/",
    # so "a.b" (file) < "a" (dir, "a/") < "a0"; plus non-ASCII names.
    paths = ["threads/A/B/x/handoff.json", "a.b", "a/file.json", "a0",
             "threads/A/B/x/msg-000001.json", "threads/A/C/y/handoff.json",
             "teammates/zoë@acme/profile.json", "a-b", "a/z"]
    tree = None
    for n, path in enumerate(paths):
        tree = store.tree_with(tree, path, f"content {n}\n".encode())
    assert tree is not None
    listed = git(store.path, "ls-tree", "-r", "--name-only", "-z", tree).split("\0")
    assert sorted(p for p in listed if p) == sorted(paths)
    # Rebuilding the same content with git's own mktree gives the same id.
    by_git = _mktree(store.path, tree)
    assert by_git == tree
    # Replacing a file keeps one entry of that name.
    again = store.tree_with(tree, "a0", b"other\n")
    assert git(store.path, "cat-file", "-p", f"{again}:a0") == "other\n"
    assert git(store.path, "ls-tree", "--name-only", again).split().count("a0") == 1
    commit = store.commit(tree=again, parents=[], message="m\n", author="alice@acme",
                          email="alice@acme")
    store.set_ref("refs/heads/main", commit)
    subprocess.run(["git", "--git-dir", str(store.path), "fsck", "--strict", "--no-dangling"],
                   check=True, capture_output=True)


def _mktree(repo: Path, tree: str) -> str:
    """The id git's own mktree gives the same entries, recursively."""
    lines = []
    for line in git(repo, "ls-tree", "-z", tree).split("\0"):
        if not line:
            continue
        meta, name = line.split("\t", 1)
        mode, kind, oid = meta.split()
        if kind == "tree":
            oid = _mktree(repo, oid)
        lines.append(f"{mode} {kind} {oid}\t{name}")
    return subprocess.run(["git", "--git-dir", str(repo), "mktree", "-z"],
                          input="\0".join(lines) + "\0", capture_output=True, text=True,
                          check=True).stdout.strip()
