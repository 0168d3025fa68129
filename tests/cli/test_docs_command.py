"""`gitrelay docs`: the documentation every install has, read as a new user would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def gitrelay(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gitrelay", *args], capture_output=True,
                          text=True, timeout=60, check=False)


def test_the_list_names_every_page_of_the_docs_folder_with_its_title():
    proc = gitrelay("docs")
    assert proc.returncode == 0, proc.stderr
    pages = sorted(p.stem for p in (ROOT / "docs").glob("*.md"))
    listed = [ln.split()[0] for ln in proc.stdout.splitlines()[:len(pages)]]
    assert listed == pages
    assert "Trust rules and provenance" in proc.stdout
    assert "gitrelay docs getting-started" in proc.stdout


def test_a_topic_off_a_terminal_is_printed_whole_and_its_path_is_the_shipped_file():
    proc = gitrelay("docs", "trust")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == (ROOT / "docs" / "trust.md").read_text(encoding="utf-8")
    where = gitrelay("docs", "trust", "--path")
    assert Path(where.stdout.strip()).read_bytes() == (ROOT / "docs" / "trust.md").read_bytes()


def test_a_mistyped_topic_is_one_usage_line_with_the_page_meant():
    proc = gitrelay("docs", "trsut")
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.startswith("gitrelay: invalid_argument")
    assert "Did you mean trust?" in proc.stderr


def test_help_points_at_the_docs_every_install_has():
    proc = gitrelay("--help")
    assert "gitrelay docs" in proc.stdout
    assert "docs/" not in proc.stdout
