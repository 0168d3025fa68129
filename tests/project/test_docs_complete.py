"""The docs keep up with the code: every CLI command and flag is in docs/cli.md,
every MCP tool in docs/tools.md, and every example in docs/cli.md runs.

The examples run in document order, in-process through `gitrelay.cli.main.main`
(the console script's function), as bob@acme would type them: HOME is a
throw-away directory holding the example relay at ~/relays/acme.git and
Bob's trust file (example-repo/trust.yaml) at ~/.agentrelay/trust.yaml.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from gitrelay.cli.main import EXIT_INVALID, build_parser, main
from gitrelay.demo.example import load_example

ROOT = Path(__file__).resolve().parent.parent.parent
CLI_DOC = ROOT / "docs" / "cli.md"
TOOLS_DOC = ROOT / "docs" / "tools.md"
GLOBAL_FLAGS = {"--relay", "--as", "--help"}
ERROR_LINE = re.compile(r"^gitrelay: (\w+) \((-?\d+)\): ")
NOT_RUN = re.compile(r"<!-- not run: (.+?) -->")


def commands() -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def sections(doc: str) -> dict[str, str]:
    """``## gitrelay <name>`` sections of docs/cli.md, by command name."""
    out: dict[str, str] = {}
    parts = re.split(r"^## gitrelay (\S+).*$", doc, flags=re.M)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        out[name] = body
    return out


@dataclass
class Example:
    command: str
    expected: list[str] = field(default_factory=list)
    heredoc: str | None = None


@dataclass
class Block:
    examples: list[Example]
    not_run: str | None


def blocks(text: str) -> list[Block]:
    """The ```console blocks of ``text``: ``$ `` lines, heredoc bodies, expected output."""
    out = []
    for m in re.finditer(r"(?:^(<!--[^\n]*-->)\n)?^```console\n(.*?)^```", text, re.M | re.S):
        marker = NOT_RUN.match(m.group(1) or "")
        examples: list[Example] = []
        lines = iter(m.group(2).splitlines())
        for line in lines:
            if line.startswith("$ "):
                ex = Example(line[2:])
                if "<<'EOF'" in line:
                    body = []
                    for more in lines:
                        if more == "EOF":
                            break
                        body.append(more)
                    ex.heredoc = "\n".join(body) + "\n"
                examples.append(ex)
            elif examples:
                examples[-1].expected.append(line)
        out.append(Block(examples, marker.group(1) if marker else None))
    return out


@dataclass
class Ran:
    example: Example
    code: int
    out: str
    err: str


def run_example(ex: Example, cwd: Path) -> Ran:
    """Run one documented command line (``gitrelay …`` or ``cat > FILE <<'EOF'``)."""
    words = [os.path.expanduser(w) if w.startswith("~") else w for w in shlex.split(
        ex.command.split("<<'EOF'")[0])]
    if ex.heredoc is not None:
        assert words[:2] == ["cat", ">"] and len(words) == 3, ex.command
        (cwd / words[2]).write_text(ex.heredoc)
        return Ran(ex, 0, "", "")
    assert words[0] == "gitrelay", f"only gitrelay commands and heredocs run: {ex.command}"
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(words[1:])
        except SystemExit as exc:
            code = int(exc.code or 0)
    return Ran(ex, code, out.getvalue(), err.getvalue())


def check(ran: Ran) -> None:
    ex = ran.example
    shown = [ln for ln in ex.expected if ln.strip()]
    error = next((ERROR_LINE.match(ln) for ln in shown if ERROR_LINE.match(ln)), None)
    where = f"`{ex.command}` (exit {ran.code})\n{ran.out}{ran.err}"
    if error:
        assert ran.code != 0, where
        assert ran.err.startswith(error.group(0)), where
    elif any("problem(s) found" in ln for ln in shown):
        assert ran.code == EXIT_INVALID, where
    else:
        assert ran.code == 0, where
    assert_output_as_documented(ex, ran, where)


# What differs from one run of the examples to the next: the date and time the example
# relay was built at, how long ago and how long something took, the hash in a
# mirror's folder name, and a whole commit id (its commits carry the build time).
VOLATILE = [(re.compile(r"\d{4}-\d\d-\d\d(?:[ T]\d\d:\d\d(?::\d\d(?:\.\d+)?)?Z)?"), "<when>"),
            (re.compile(r"\(\d+ s ago\)"), "(<n> s ago)"),
            (re.compile(r"\bin \d+(?:\.\d+)? s\b"), "in <n> s"),
            (re.compile(r"(mirrors/[\w.-]+-)[0-9a-f]{12}(\.git)"), r"\1<hash>\2"),
            (re.compile(r"\b[0-9a-f]{40}\b"), "<commit>")]


def normalized(line: str, home: str = "") -> str:
    if home:
        line = line.replace(home, "/home/bob")
    for pattern, stands_for in VOLATILE:
        line = pattern.sub(stands_for, line)
    return line.rstrip()


def assert_output_as_documented(ex: Example, ran: Ran, where: str) -> None:
    """Every line the docs show is a line of the output (stdout, then stderr), in the
    documented order within each stream; a documented line cut with "…" matches an output
    line that starts with what it shows. Blank lines are not compared."""
    home = os.environ.get("HOME", "")
    streams = [[normalized(ln, home) for ln in text.splitlines() if ln.strip()]
               for text in (ran.out, ran.err)]
    positions = [0, 0]
    for shown in (normalized(ln) for ln in ex.expected if ln.strip()):
        cut = shown.endswith("…")
        for n, lines in enumerate(streams):
            found = next((i for i in range(positions[n], len(lines)) if lines[i] == shown or (
                cut and lines[i].startswith(shown[:-1]))), None)
            if found is not None:
                positions[n] = found + 1
                break
        else:
            raise AssertionError(f"the docs show a line the output does not have, or not "
                                 f"in that order:\n  {shown}\n{where}")


# --- coverage -------------------------------------------------------------------------


def test_every_cli_command_has_a_section_in_docs_cli_md():
    documented = sections(CLI_DOC.read_text())
    missing = sorted(set(commands()) - set(documented))
    assert not missing, f"docs/cli.md has no `## gitrelay <command>` section for {missing}"
    stale = sorted(set(documented) - set(commands()))
    assert not stale, f"docs/cli.md documents commands that do not exist: {stale}"


def test_every_flag_of_every_command_is_documented_in_its_section():
    documented = sections(CLI_DOC.read_text())
    doc = CLI_DOC.read_text()
    for flag in GLOBAL_FLAGS - {"--help"}:
        assert f"`{flag}" in doc, flag
    for name, parser in commands().items():
        for action in parser._actions:
            for option in action.option_strings:
                if option.startswith("--") and option not in GLOBAL_FLAGS:
                    assert f"`{option}" in documented[name], f"{name} {option}"


def test_every_command_has_an_example_that_runs_or_says_why_not():
    documented = sections(CLI_DOC.read_text())
    for name, text in documented.items():
        found = blocks(text)
        assert found, f"gitrelay {name} has no ```console example"
        for block in found:
            assert block.examples, f"gitrelay {name}: an example block without `$ ` lines"
            if block.not_run is None:
                assert any(re.match(rf"gitrelay {name}\b", e.command)
                           for e in block.examples), name


def test_every_mcp_tool_is_documented_in_docs_tools_md():
    from gitrelay.mcp.agentserver import build_server

    tools = [t["name"] for t in build_server(lambda: None).list_tools()]  # type: ignore[arg-type,return-value]
    assert len(tools) >= 9
    assert TOOLS_DOC.exists(), "docs/tools.md is missing"
    text = TOOLS_DOC.read_text()
    missing = [t for t in tools if not re.search(rf"^#+ .*`?{t}`?", text, re.M)]
    assert not missing, f"docs/tools.md has no heading for {missing}"


# --- the examples run ------------------------------------------------------------------------


@pytest.fixture
def bobs_machine(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME with the example relay at ~/relays/acme.git and Bob's trust file."""
    home = tmp_path / "home" / "bob"
    home.mkdir(parents=True)
    # As docs/cli.md tells a reader to build it: one command.
    assert main(["demo", "--example-relay", str(home / "relays" / "acme.git")]) == 0
    (home / ".agentrelay").mkdir()
    shutil.copyfile(load_example().trust_path, home / ".agentrelay" / "trust.yaml")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("GITRELAY_HOME", raising=False)
    monkeypatch.delenv("GITRELAY_TRUST", raising=False)
    monkeypatch.chdir(home)
    return home


@pytest.mark.slow
def test_every_example_in_docs_cli_md_runs_as_documented(bobs_machine):
    ran = 0
    for block in blocks(CLI_DOC.read_text()):
        if block.not_run is not None:
            continue
        for ex in block.examples:
            check(run_example(ex, bobs_machine))
            ran += 1
    assert ran >= 25


def test_the_output_check_compares_whole_lines_not_first_words():
    ex = Example("gitrelay status", expected=["relay        /home/bob/relays/acme.git",
                                              "last fetch   2026-12-01 08:24Z (0 s ago)",
                                              "queued: nothing, your outbox…"])
    same = Ran(ex, 0, "relay        /home/bob/relays/acme.git\n"
                      "last fetch   2026-12-05 10:02Z (3 s ago)\n"
                      "queued: nothing, your outbox is empty\n", "")
    assert_output_as_documented(ex, same, "")
    for wrong in ("relay        /home/bob/relays/other.git\n",  # same first word
                  "queued: nothing, your outbox is empty\nrelay        /home/bob/relays/acme.git\n"
                  "last fetch   2026-12-05 10:02Z (3 s ago)\n"):  # out of order
        with pytest.raises(AssertionError):
            assert_output_as_documented(ex, Ran(ex, 0, wrong, ""), "")
