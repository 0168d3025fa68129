"""Each host's hook commands in the form that host runs on each OS: the ``gitrelay``
console script by absolute path and plain words, with no other shell syntax. On Linux
and macOS every host runs a command through ``sh -c``; on Windows Claude Code runs it
through Git for Windows' bash, Codex through cmd.exe and Cursor through PowerShell
(docs/agents.md). The sh forms are read here by a real sh and bash; the cmd and
PowerShell forms are checked against those shells' quoting rules (their shells are not
on this machine; the Windows runner of .github/workflows/ci.yml runs these tests too)."""

from __future__ import annotations

import shlex
import subprocess
from typing import Any

import pytest

from gitrelay.hosts.settings import HOOK_SHELLS, hook_command, is_ours, wanted_hooks

POSIX_PATHS = ["/home/bob/.local/bin/gitrelay", "/Users/Bob Chen/venv/bin/gitrelay",
               "/opt/it's/gitrelay"]
WINDOWS_PATHS = [r"C:\Users\bob\AppData\Roaming\Python\Scripts\gitrelay.exe",
                 r"C:\Program Files\Python313\Scripts\gitrelay.exe",
                 r"C:\Users\o'neil\venv\Scripts\gitrelay.exe"]


def commands(groups: dict[str, list[dict[str, Any]]]) -> list[str]:
    found = []
    for entries in groups.values():
        for entry in entries:
            for hook in entry.get("hooks", [entry]):
                found.append(hook["command"])
    return found


def words_in(shell: str, command: str) -> list[str]:
    """The words a real ``shell`` reads in ``command`` (printed one a line)."""
    out = subprocess.run([shell, "-c", "printf '%s\\n' " + command], capture_output=True,
                         text=True, timeout=30, check=True).stdout
    return out.splitlines()


@pytest.mark.parametrize("host", ["claude", "codex", "cursor"])
@pytest.mark.parametrize("exe", POSIX_PATHS)
def test_posix_forms_are_read_by_sh_as_exactly_the_console_scripts_words(host: str,
                                                                        exe: str) -> None:
    for command in commands(wanted_hooks(host, exe, system="posix")):
        assert is_ours(command), command
        words = words_in("sh", command)
        assert words[0] == exe and words[1] == "hook" and "--host" in words, command
        assert words == shlex.split(command)


@pytest.mark.parametrize("exe", WINDOWS_PATHS)
def test_claude_on_windows_gets_a_form_git_bash_reads_with_forward_slashes(exe: str) -> None:
    for command in commands(wanted_hooks("claude", exe, system="windows")):
        assert is_ours(command), command
        assert "\\" not in command  # Git Bash would read a backslash as an escape
        words = words_in("bash", command)
        assert words[0] == exe.replace("\\", "/") and words[1:3] == ["hook", words[2]]


@pytest.mark.parametrize("exe", WINDOWS_PATHS)
def test_codex_on_windows_gets_a_cmd_form(exe: str) -> None:
    for command in commands(wanted_hooks("codex", exe, system="windows")):
        assert is_ours(command), command
        if " " in exe:  # cmd.exe: double quotes around a path with spaces, nothing else
            assert command.startswith(f'"{exe}" hook ')
        else:
            assert command.startswith(f"{exe} hook ")
        assert not set(command) & set("&|<>^%") or command.startswith('"')


@pytest.mark.parametrize("exe", WINDOWS_PATHS)
def test_cursor_on_windows_gets_a_powershell_form(exe: str) -> None:
    for command in commands(wanted_hooks("cursor", exe, system="windows")):
        assert is_ours(command), command
        if " " in exe or "'" in exe:  # PowerShell: the call operator and a quoted path
            assert command.startswith("& '" + exe.replace("'", "''") + "' hook ")
        else:
            assert command.startswith(f"{exe} hook ")


def test_a_project_files_bare_command_is_one_form_for_every_shell() -> None:
    # A team's shared files name `gitrelay` (found on each PATH): no quoting in any shell.
    forms = {hook_command("gitrelay", ["hook", "stop", "--host", "codex"], shell)
             for shell in set(HOOK_SHELLS.values())}
    assert forms == {"gitrelay hook stop --host codex"}


@pytest.mark.parametrize("command", [
    "gitrelay hook stop; my.sh",
    "'/usr/bin/gitrelay' hook stop && evil",
    '"C:\\Program Files\\gitrelay.exe" hook stop & calc',
    "& 'C:\\Program Files\\gitrelay.exe' hook stop; calc",
    "C:\\x\\gitrelay.exe hook stop | more",
    '"C:\\x\\gitrelay.exe" hook stop',          # quoted where cmd needs no quotes: not ours
    "powershell -c gitrelay hook stop",
])
def test_a_command_with_any_other_shell_syntax_is_the_users(command: str) -> None:
    assert not is_ours(command)
