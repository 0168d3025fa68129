"""Path judgement under Windows' aliases, case-insensitive file systems and Unicode
forms: every alias of a forbidden path is refused, and the same spelling of a legal
path still reads as the file it opens (one refused/legal pair per alias).

Windows' reading is the normaliser's explicit ``windows=True`` mode (the default on
Windows); case folding its explicit ``fold_case=True`` mode, which the guard turns on
where the working tree's file system ignores case (``guard.ignores_case``). This
machine's kernel cannot mount a case-insensitive file system (ext4's casefold needs
CONFIG_UNICODE, and no FUSE case-folding file system is packaged for Debian 12), so
the case tests run through the explicit mode; the macOS and Windows runners of
.github/workflows/ci.yml run them on case-insensitive file systems as well.
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

import pytest

from gitrelay.hosts.guard import ignores_case
from gitrelay.trust.permission import auto_writable
from gitrelay.trust.trust import TrustOverlay
from gitrelay.trust.trustkeys import normalize_repo_path, windows_reading

ALLOWED = ["src/", "docs/guide.md"]

# (what the alias is, a spelling that reaches .git or leaves the repository: refused,
#  the same spelling of a legal path: covered by ALLOWED as the file Windows opens)
PAIRS = [
    ("trailing dot", ".git./config", "src./api/x.py"),
    ("trailing space", ".git /config", "src /api/x.py"),
    ("dots and spaces", "src/.git. . /hooks/pre-commit", "docs/guide.md. ."),
    ("default stream", ".git::$DATA/config", "docs/guide.md::$DATA"),
    ("8.3 short name of .git", "GIT~1/config", "src/notes~draft.md"),
    ("backslash separator", "src\\..\\.git\\config", "src\\api\\x.py"),
    ("\\\\?\\ prefix", "\\\\?\\C:\\work\\web\\src\\x.py", "src\\x.py"),
    ("case of .git", "src/.GIT/config", "src/.gitignore"),
]


@pytest.mark.parametrize(("alias", "refused", "legal"), PAIRS, ids=[p[0] for p in PAIRS])
def test_windows_aliases_refused_and_legal(alias: str, refused: str, legal: str) -> None:
    assert normalize_repo_path(refused, windows=True) is None, alias
    assert not auto_writable(["./", "src/", ".git/", "GIT~1/"], refused), alias
    assert auto_writable_on_windows(legal), alias


def auto_writable_on_windows(path: str) -> bool:
    return auto_writable(ALLOWED, path, windows=True)


def test_an_alias_of_git_is_refused_on_every_os() -> None:
    # A .git alias is unsafe whatever the OS: a checkout may move to Windows.
    for path in (".git./config", ".GIT/config", "GIT~1/config", "a/.git::$DATA/x"):
        assert normalize_repo_path(path, windows=False) is None, path


def test_other_streams_and_short_names_are_unsafe_on_windows_and_names_elsewhere() -> None:
    # Another stream is another file's data; a short name could be any long name.
    for path in ("docs/guide.md:hidden", "docs/guide.md:hidden:$DATA", "src/REPORT~1.TXT",
                 "PROGRA~1/x"):
        assert normalize_repo_path(path, windows=True) is None, path
    # On Linux and macOS they are plain (if odd) names inside the repository.
    assert normalize_repo_path("src/REPORT~1.TXT", windows=False) == "src/REPORT~1.TXT"
    assert normalize_repo_path("src\\x.py", windows=False) is None  # a separator on Windows


def test_case_is_folded_where_the_file_system_ignores_it() -> None:
    # Refused: an entry for src/api/ does not cover SRC/API/x.py on a case-sensitive
    # file system (it is another file there) ...
    assert not auto_writable(["src/api/"], "SRC/API/x.py")
    # ... legal: on a case-insensitive one it is the same file, judged alike.
    assert auto_writable(["src/api/"], "SRC/API/x.py", fold_case=True)
    assert auto_writable(["SRC/Api/"], "src/api/x.py", fold_case=True)
    # Folding never lets .git through.
    assert not auto_writable(["./", "src/"], "src/.Git/config", fold_case=True)


def test_unicode_forms_are_one_name() -> None:
    nfd = unicodedata.normalize("NFD", "café/menü.md")   # as macOS stores names
    nfc = unicodedata.normalize("NFC", "café/menü.md")
    assert nfd != nfc
    assert normalize_repo_path(nfd) == nfc
    # Legal: an entry typed in either form covers the file in the other ...
    assert auto_writable([nfc[:5]], nfd)
    assert auto_writable([nfd[:6]], nfc)
    # ... refused: a decomposed spelling is no way round .git (nor other folders).
    assert not auto_writable(["docs/"], unicodedata.normalize("NFD", "cafè/x.md"))


def test_the_trust_files_reading_is_the_guards(tmp_path: Path) -> None:
    overlay = TrustOverlay(auto_write_paths=ALLOWED)
    for _, refused, legal in PAIRS:
        # The trust file keeps its entries as written: the guard reads them as given.
        assert auto_writable(overlay.auto_write_paths, refused) is auto_writable(ALLOWED,
                                                                                 refused)
        assert auto_writable(overlay.auto_write_paths, legal) is auto_writable(ALLOWED, legal)


def test_protected_files_are_compared_as_windows_opens_them() -> None:
    for alias in ("/home/bob/.agentrelay/trust.yaml.", "/home/bob/.agentrelay/trust.yaml ",
                  "/home/bob/.agentrelay/trust.yaml::$DATA",
                  "\\home\\bob\\.agentrelay\\trust.yaml"):
        assert windows_reading(alias) == "/home/bob/.agentrelay/trust.yaml", alias
    assert windows_reading("/home/bob/.agentrelay/trust.yaml.bak") != \
        "/home/bob/.agentrelay/trust.yaml"


def test_ignores_case_tells_this_file_system(tmp_path: Path) -> None:
    work = tmp_path / "web"
    (work / ".git").mkdir(parents=True)
    # The file system under test: case-sensitive on Linux (ext4, tmpfs), case-insensitive
    # on the macOS and Windows runners' defaults. The probe agrees with the OS's own view.
    same = (work / ".GIT").exists()
    assert ignores_case(work) is same
