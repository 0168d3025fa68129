"""``gitrelay docs``: the documentation that ships inside every install.

The pages are the Markdown files of ``gitrelay/docs/`` (package data, the same files as the
source tree's ``docs/``). With a topic, the page goes through a pager on a terminal
(``$PAGER``, else ``less`` or ``more`` where found) and is printed otherwise; ``--path``
prints where it lies instead, for an editor or a Markdown viewer.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from gitrelay.cli.common import EXIT_OK

if TYPE_CHECKING:
    import argparse

    from gitrelay.cli.common import Commands

__all__ = ["docs_dir", "register", "topics"]


def docs_dir() -> Path:
    """Where this install's documentation lies."""
    return Path(__file__).resolve().parent.parent / "docs"


def topics() -> list[str]:
    """Every page's topic: its file name without ``.md``."""
    folder = docs_dir()
    return sorted(p.stem for p in folder.glob("*.md")) if folder.is_dir() else []


def _title(page: Path) -> str:
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return ""


def _pager() -> list[str] | None:
    chosen = os.environ.get("PAGER", "").strip()
    if chosen:
        import shlex

        return shlex.split(chosen, posix=os.name != "nt")
    for name, flags in (("less", ["-R", "-F", "-X"]), ("more", [])):
        found = shutil.which(name)
        if found:
            return [found, *flags]
    return None


def _cmd_docs(args: argparse.Namespace) -> int:
    if args.topic is None:
        if args.path:
            print(docs_dir())
            return EXIT_OK
        names = topics()
        wide = max((len(n) for n in names), default=0)
        for name in names:
            print(f"{name.ljust(wide)}  {_title(docs_dir() / f'{name}.md')}")
        print("\nRead one with `gitrelay docs TOPIC` (e.g. `gitrelay docs getting-started`).")
        return EXIT_OK
    page = docs_dir() / f"{args.topic}.md"
    if args.path:
        print(page)
        return EXIT_OK
    pager = _pager() if sys.stdout.isatty() else None
    if pager:
        try:
            subprocess.run([*pager, str(page)], check=False)
            return EXIT_OK
        except OSError:
            pass  # the pager named could not start: print the page instead
    sys.stdout.write(page.read_text(encoding="utf-8"))
    return EXIT_OK


def register(commands: Commands) -> None:
    p = commands.add("docs", _cmd_docs,
                     "read the documentation that ships with gitrelay (a pager on a terminal)",
                     "gitrelay docs\ngitrelay docs getting-started\ngitrelay docs trust --path",
                     identity=False)
    p.add_argument("topic", nargs="?", choices=topics() or None, metavar="TOPIC",
                   help="the page to read; without one, the list of pages")
    p.add_argument("--path", action="store_true",
                   help="print where the page (or, without a topic, the folder) lies")
