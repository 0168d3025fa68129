"""Store.tree_with writes trees itself: git must read them as it writes them."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitrelay.core.objects import MODE_BLOB, TreeEntry, diff_trees, tree_problem
from gitrelay.store.gitstore import Store
from tests.kit import git, git_out


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
    listed = git_out(store.path, "ls-tree", "-r", "--name-only", "-z", tree).split("\0")
    assert sorted(p for p in listed if p) == sorted(paths)
    # Rebuilding the same content with git's own mktree gives the same id.
    by_git = _mktree(store.path, tree)
    assert by_git == tree
    # Replacing a file keeps one entry of that name.
    again = store.tree_with(tree, "a0", b"other\n")
    assert git_out(store.path, "cat-file", "-p", f"{again}:a0") == "other\n"
    assert git_out(store.path, "ls-tree", "--name-only", again).split().count("a0") == 1
    commit = store.commit(tree=again, parents=[], message="m\n", author="alice@acme",
                          email="alice@acme")
    store.set_ref("refs/heads/main", commit)
    git("fsck", "--strict", "--no-dangling", git_dir=store.path)


def _mktree(repo: Path, tree: str) -> str:
    """The id git's own mktree gives the same entries, recursively."""
    lines = []
    for line in git_out(repo, "ls-tree", "-z", tree).split("\0"):
        if not line:
            continue
        meta, name = line.split("\t", 1)
        mode, kind, oid = meta.split()
        if kind == "tree":
            oid = _mktree(repo, oid)
        lines.append(f"{mode} {kind} {oid}\t{name}")
    return git("mktree", "-z", git_dir=repo,
               input=("\0".join(lines) + "\0").encode()).stdout.decode().strip()


def test_commits_are_laid_out_byte_for_byte_as_libgit2_writes_them(tmp_path: Path) -> None:
    # The store writes commit text itself (a staged commit's tree and parents are not
    # filed yet, which libgit2 requires); the gate parses that text, and signatures
    # are checked over it, so it must stay exactly what libgit2 wrote before.
    import pygit2

    from gitrelay.store.gitstore import with_signature

    store = Store(tmp_path / "store.git", create=True)
    tree = store.tree_with(None, "a", b"x\n")
    message = "handoff ABC alice@acme → bob@acme (inform): hi\n\nGitrelay-Op: handoff\n"
    first = store.commit(tree=tree, parents=[], message=message, author="alice@acme",
                         email="alice@acme", when=1_700_000_000)
    sig = pygit2.Signature("alice@acme", "alice@acme", 1_700_000_000, 0)
    assert first == str(store.repo.create_commit(None, sig, sig, message,
                                                 pygit2.Oid(hex=tree), []))
    second = store.commit(tree=tree, parents=[first], message="two\n", author="bob@acme",
                          email="bob@acme", when=1_700_000_001)
    sig2 = pygit2.Signature("bob@acme", "bob@acme", 1_700_000_001, 0)
    assert second == str(store.repo.create_commit(None, sig2, sig2, "two\n",
                                                  pygit2.Oid(hex=tree),
                                                  [pygit2.Oid(hex=first)]))
    content = store.repo.odb.read(second)[1].decode()
    for signature in ("-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----\n",
                      "-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----"):
        by_libgit2 = store.repo.create_commit_with_signature(content, signature, "gpgsig")
        assert with_signature(content, signature) == store.repo.odb.read(by_libgit2)[1]
    # and what it stages (hashed, not filed) gets the id the object database gives it
    with store.staging() as staged:
        third = store.commit(tree=tree, parents=[second], message="three\n",
                             author="alice@acme", email="alice@acme", when=1_700_000_002)
    assert third not in store.repo
    store.file_objects(staged)
    assert third in store.repo
    git_out(store.path, "cat-file", "-e", third)


def test_trees_built_on_well_formed_trees_are_known_well_formed(tmp_path: Path) -> None:
    """The rules skip tree_problem for trees the store built on well-formed ones; a
    tree built on one nobody checked must still be checked (and refused when bad)."""
    store = Store(tmp_path / "store.git", create=True)
    objs = store.objects
    tree = None
    for n, path in enumerate(["threads/A/B/x/handoff.json", "a.b", "a/file.json", "a0"]):
        tree = store.tree_with(tree, path, f"content {n}\n".encode())
    assert tree in objs.sound_trees
    for oid in objs.sound_trees:
        assert tree_problem(objs.tree(oid)) is None
    blob = store.source.write("blob", b"x\n")
    unsorted = [TreeEntry(MODE_BLOB, name, blob) for name in ("b.json", "a.json")]
    bad = store.source.write("tree", b"".join(e.raw for e in unsorted))
    built = store.tree_with(bad, "c.json", b"y\n")
    assert built not in objs.sound_trees
    with pytest.raises(ValueError, match="out-of-order"):
        diff_trees(objs, None, built)
