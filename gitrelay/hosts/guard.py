"""The guard: holds a session to the trust rules once a teammate's text has entered it.

Before each tool call the host runs ``gitrelay hook pre-tool-use``; :func:`decide`
answers from the session's state (:mod:`gitrelay.hosts.session`):

- no teammate text has entered this session (nothing shown, nothing accepted, no
  gitrelay tool called), or the call is one of gitrelay's own tools (they write to
  the relay only): no opinion (``None``);
- from then on, until the session ends, whether or not a handoff is still open: a
  call that touches the trust file, the sessions' state or the host's settings and
  MCP configuration (by a path argument, a path spelled in any text of its input,
  compared as the file system resolves it and without regard to case), or a shell
  command running one of gitrelay's own commands that change trust or setup:
  ``deny``;
- while a handoff accepted in this session is in progress, its overlay:

  - a shell call that is exactly one of the handoff's ``test_command`` artifacts:
    ``allow`` when the overlay's ``auto_test`` is true, else ``ask``;
  - a file write (Edit, Write, MultiEdit, NotebookEdit, or a patch given to the
    host's own patch tool, read the way that host reads it): ``allow`` when every
    path is under ``auto_write_paths``, whatever ``require_approval`` says; else
    ``ask`` (``deny`` with ``outside="deny"``);
  - a shell command holding a patch that is not the host's own patch form: ``ask``;
  - any other tool named in ``require_approval``: ``ask``;
  - anything else: no opinion.

The precedence is :mod:`gitrelay.trust.permission`'s, which decides; the guard reads
the call (which tool, which paths) and words the answer: for the person who approves
an ask, and for the model, one line of what was refused, why and what to do next.
A shell command is never ``allow`` unless it is exactly a command the rules allow:
a test command, or (Codex only) exactly the ``apply_patch`` heredoc Codex itself
takes over and applies (:func:`codex_shell_patch`).

With several handoffs in progress each is applied and the strictest answer wins
(deny, then ask, then allow). The overlay is the one the user's trust file gives
the sender, recorded at the accept with the file's size and modification time; if
the file changed since, it is read again (so a teammate blocked since is held to
nothing automatic). Nothing the teammate wrote is used but the exact text of a
test command, which can only be run without asking where the user's own trust
file says ``auto_test``.

Standard library only until the trust file must be read again: the guard runs on
every tool call.
"""

from __future__ import annotations

import os
import re
import unicodedata
from collections.abc import Iterable, Iterator
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Literal, NamedTuple

from gitrelay.hosts.hostfiles import HOSTS, all_setup_names, setup_files
from gitrelay.hosts.session import InProgress, SessionState, sessions_root
from gitrelay.trust import permission
from gitrelay.trust.permission import (
    PATCH_TOOL,
    Verdict,
    auto_test_verdict,
    tool_verdict,
    untrusted,
    write_verdict,
)
from gitrelay.trust.trustfile import default_trust_path
from gitrelay.trust.trustfile import stamp as trust_stamp
from gitrelay.trust.trustkeys import windows_reading

__all__ = ["WRITE_TOOLS", "Decision", "PatchFile", "codex_shell_patch", "decide",
           "ignores_case", "parse_codex_patch", "protected_markers"]

# The hosts' file-writing tools and the argument naming the file each writes.
WRITE_TOOLS = {t: "notebook_path" if t == "NotebookEdit" else "file_path"
               for t in permission.WRITE_TOOLS}
SHELL_TOOLS = ("Bash", "Shell", "shell", "exec_command", "local_shell")
PATCH_TOOLS = (PATCH_TOOL,)
READ_TOOLS = ("Read", "Grep", "Glob", "LS", "NotebookRead", "view_image", "read_file")
STDIN_TOOLS = ("write_stdin",)      # Codex: text typed into a process exec_command started
_RANK = {"deny": 3, "ask": 2, "allow": 1}
_SHELL_TEXT_MAX = 65_536   # characters of a shell command read word by word
_NORMALISED_MAX = 16_384   # longer texts are searched for protected names by case only

Kind = Literal["allow", "ask", "deny"]


class Decision(NamedTuple):
    """The guard's answer: ``kind`` None means no opinion (the host decides as usual).
    ``reason`` is for the person (an ask's prompt, an allow's note); ``refusal`` is for
    the model, one line: what was refused, why, and what to do next (a deny's reason,
    and an ask's where the host cannot ask)."""

    kind: Kind | None
    reason: str = ""
    refusal: str = ""

    def stricter(self, other: Decision) -> Decision:
        mine = _RANK.get(self.kind or "", 0)
        theirs = _RANK.get(other.kind or "", 0)
        return other if theirs > mine else self

    @property
    def to_model(self) -> str:
        """What the model reads when the call does not run."""
        return self.refusal or self.reason


NO_OPINION = Decision(None)


# --------------------------------------------------------------------------- paths


def ignores_case(folder: Path) -> bool:
    """Whether the file system holding ``folder`` ignores case (macOS's and Windows'
    by default, a casefolded ext4 folder): its ``.git`` is found as ``.GIT`` too, or,
    without one, the folder under its name in the other case is the same folder."""
    if os.path.lexists(folder / ".git"):
        return os.path.lexists(folder / ".GIT")
    other = folder.parent / folder.name.swapcase()
    if other == folder:
        return False
    try:
        return os.path.samefile(folder, other)
    except OSError:
        return False


def repo_root(cwd: str) -> Path:
    """The working tree holding ``cwd`` (the nearest folder with ``.git``), else ``cwd``."""
    start = Path(os.path.realpath(cwd or "."))
    for folder in (start, *start.parents):
        if (folder / ".git").exists():
            return folder
    return start


def _relative(path: str, root: Path, cwd: str) -> str | None:
    """``path`` relative to ``root``; None when it lies outside it."""
    full = Path(path) if os.path.isabs(path) else Path(cwd or ".") / path
    real = Path(os.path.realpath(full))
    try:
        return real.relative_to(root).as_posix()
    except ValueError:
        return None


def _fold(text: str) -> str:
    """``text`` as a case-insensitive file system compares it: one Unicode form, one
    case (macOS and Windows file systems ignore both differences)."""
    return unicodedata.normalize("NFC", text).casefold()


def _resolved(path: str, cwd: str) -> str:
    """``path`` as the file system resolves it (relative to ``cwd``, ``~`` expanded,
    symbolic links followed), folded for comparison, with each segment as Windows
    opens it (``trust.yaml.`` and ``trust.yaml::$DATA`` are ``trust.yaml``)."""
    full = os.path.expanduser(path)
    if not os.path.isabs(full):
        full = os.path.join(cwd or ".", full)
    return _fold(windows_reading(os.path.realpath(full)))


# --------------------------------------------------------------------------- patches

# Codex's apply_patch format, read as Codex 0.171's parser reads it (codex-rs/apply-patch):
# the text is trimmed, split at "\n" (a trailing "\r" dropped), the first and last lines
# trimmed and compared with the markers, and a hunk's header line trimmed before its
# marker is looked for, so an indented "*** Update File:" is a header. Rust's trim.
_WS = ("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007"
       "\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_BEGIN, _END = "*** Begin Patch", "*** End Patch"
_ADD, _DELETE, _UPDATE = "*** Add File: ", "*** Delete File: ", "*** Update File: "
_MOVE, _EOF_MARK = "*** Move to: ", "*** End of File"
_HEREDOC_OPENERS = ("<<EOF", "<<'EOF'", '<<"EOF"')
# Any line that looks like a file header, however it is spaced or cased: judged too,
# so a patch the guard reads differently from the host can only get a stricter answer.
_LOOSE_HEADER = re.compile(
    r"^\s*\*+\s*(?:(?P<op>add|delete|update)\s+file|(?P<move>move\s+to))\s*:\s*(?P<path>.*?)\s*$",
    re.IGNORECASE)


class PatchFile(NamedTuple):
    """One file a patch writes: ``op`` is ``add``, ``delete``, ``update`` or ``move``
    (the new path of an updated file)."""

    op: str
    path: str


def _rust_lines(text: str) -> list[str]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [line[:-1] if line.endswith("\r") else line for line in lines]


def _body_lines(lines: list[str]) -> list[str]:
    """The hunk lines between the markers; ValueError when the markers are missing."""
    def strict(found: list[str]) -> list[str] | None:
        if len(found) >= 2 and found[0].strip(_WS) == _BEGIN and found[-1].strip(_WS) == _END:
            return found[1:-1]
        return None

    body = strict(lines)
    if body is None and len(lines) >= 4 and lines[0] in _HEREDOC_OPENERS \
            and lines[-1].endswith("EOF"):
        body = strict(lines[1:-1])
    if body is None:
        raise ValueError("the patch does not start with '*** Begin Patch' and end with "
                         "'*** End Patch'")
    return body


def _chunk_length(lines: list[str], first: bool) -> int:
    """How many lines one chunk of an updated file takes."""
    if lines[0] == "@@" or lines[0].startswith("@@ "):
        start = 1
    elif first:
        start = 0
    else:
        raise ValueError(f"an update chunk starts with {lines[0][:60]!r}, not @@")
    if start >= len(lines):
        raise ValueError("an update chunk has no lines")
    parsed = 0
    for line in lines[start:]:
        if line == _EOF_MARK:
            if parsed == 0:
                raise ValueError("an update chunk has no lines")
            parsed += 1
            break
        if line == "" or line[0] in " +-":
            parsed += 1
            continue
        if parsed == 0:
            raise ValueError(f"unexpected line in an update chunk: {line[:60]!r}")
        break
    return parsed + start


def parse_codex_patch(text: str) -> list[PatchFile]:
    """The files a Codex patch writes, in order, as Codex's parser finds them.

    Raises ValueError for a patch Codex would refuse to parse.
    """
    lines = _body_lines(_rust_lines(text.strip(_WS)))
    files: list[PatchFile] = []
    at = 0
    while at < len(lines):
        header = lines[at].strip(_WS)
        if header.startswith(_ADD):
            files.append(PatchFile("add", header[len(_ADD):]))
            at += 1
            while at < len(lines) and lines[at].startswith("+"):
                at += 1
        elif header.startswith(_DELETE):
            files.append(PatchFile("delete", header[len(_DELETE):]))
            at += 1
        elif header.startswith(_UPDATE):
            files.append(PatchFile("update", header[len(_UPDATE):]))
            at += 1
            if at < len(lines) and lines[at].startswith(_MOVE):
                files.append(PatchFile("move", lines[at][len(_MOVE):]))
                at += 1
            chunks = 0
            while at < len(lines):
                if not lines[at].strip(_WS):
                    at += 1
                    continue
                if lines[at].startswith("*"):
                    break
                at += _chunk_length(lines[at:], chunks == 0)
                chunks += 1
            if chunks == 0:
                raise ValueError(f"the update of {files[-1].path!r} is empty")
        else:
            raise ValueError(f"{header[:60]!r} is not a file header")
    return files


def _patch_files(text: str) -> list[PatchFile]:
    """Every file the patch may write: Codex's reading of it, and every line that
    looks like a file header outside added or removed text. Empty when neither finds
    one (the caller asks)."""
    try:
        found = parse_codex_patch(text)
    except ValueError:
        found = []
    seen = set(found)
    for line in text.splitlines():
        if line.startswith(("+", "-")):
            continue
        match = _LOOSE_HEADER.match(line)
        if match and match.group("path"):
            op = (match.group("op") or "move").lower()
            entry = PatchFile(op, match.group("path"))
            if entry not in seen:
                seen.add(entry)
                found.append(entry)
    return found


# Codex takes over a shell call that is exactly `apply_patch <<'EOF' … EOF`, or
# `cd DIR && apply_patch <<'EOF' … EOF`, and applies the patch itself.
_CODEX_HEREDOC = re.compile(
    r"\A(?:cd[ \t]+(?P<dir>'[^-'\n][^'\n]*'|\"[^-\"\\$`\n][^\"\\$`\n]*\""
    r"|[A-Za-z0-9._/+@%:,=][A-Za-z0-9._/+@%:,=-]*)[ \t]*&&[ \t]*)?"
    r"(?:apply_patch|applypatch)[ \t]*<<[ \t]*(?P<q>['\"]?)(?P<tag>[A-Za-z_][A-Za-z0-9_]*)"
    r"(?P=q)[ \t]*\n(?P<body>(?:.*\n)*?)(?P=tag)\n?\Z")
_SHELL_NAMES = ("bash", "zsh", "sh")


def codex_shell_patch(command: object) -> tuple[str, str | None] | None:
    """(the patch text, the ``cd`` folder or None) when a Codex shell call is exactly
    the apply_patch form Codex takes over and applies itself; else None.

    The heredoc must end at its last line (a line equal to the delimiter earlier would
    end it there, and a shell would run the rest), hold a patch Codex can parse, and,
    when its delimiter is not quoted, nothing a shell would expand (``$``, a
    backquote, a backslash): the text judged is the text applied even if Codex hands
    the command to a shell after all.
    """
    if isinstance(command, list):
        argv = [str(c) for c in command]
        if len(argv) == 2 and argv[0] in ("apply_patch", "applypatch"):
            return argv[1], None
        if len(argv) == 3 and os.path.basename(argv[0]).lower() in _SHELL_NAMES \
                and argv[1] in ("-c", "-lc"):
            command = argv[2]
        else:
            return None
    if not isinstance(command, str):
        return None
    match = _CODEX_HEREDOC.match(command.strip(" \t\n"))
    if match is None:
        return None
    body, tag = match.group("body"), match.group("tag")
    if tag in body.split("\n"):
        return None     # a shell ends the heredoc there and runs what follows
    if not match.group("q") and re.search(r"[$`\\]", body):
        return None
    try:
        parse_codex_patch(body)
    except ValueError:
        return None     # not a patch Codex applies: a shell command like any other
    folder = match.group("dir")
    if folder is not None and folder[:1] in "'\"":
        folder = folder[1:-1]
    return body, folder


def _command_text(tool_input: dict[str, Any]) -> object:
    command = tool_input.get("command")
    if command is None:
        command = tool_input.get("cmd")
    return command


def _host_patch(host: str, tool_name: str, tool_input: dict[str, Any]
                ) -> tuple[str, str | None] | None:
    """(patch text, extra folder) when the call is the host's own patch tool."""
    if tool_name in PATCH_TOOLS:
        for key in ("command", "patch", "input"):
            value = tool_input.get(key)
            if isinstance(value, str):
                return value, None
            if isinstance(value, list) and len(value) == 2 and value[0] in PATCH_TOOLS:
                return str(value[1]), None
        raise ValueError("apply_patch input has no patch")
    if host == "codex" and tool_name in SHELL_TOOLS:
        return codex_shell_patch(_command_text(tool_input))
    return None


# --------------------------------------------------------------------------- protected


def trust_file_now() -> str:
    """The user's trust file as :func:`gitrelay.trust.trust.default_trust_path` names it
    (``$GITRELAY_TRUST``, else ``~/.agentrelay/trust.yaml``), without loading YAML."""
    return str(default_trust_path())


# The hosts' settings as a tool call names them: every file `gitrelay setup` writes, and
# any of Claude Code's settings files (settings.json, settings.local.json).
_SETTINGS = (".claude/settings", *all_setup_names())
# The hosts' own folders: a shell command that names one (`cd ~/.claude && …`) is
# refused, since the file it then changes need not be spelled out.
_HOST_FOLDERS = (".claude", ".codex", ".cursor")


class Protected(NamedTuple):
    files: frozenset[str]      # folded real paths of protected files
    folders: tuple[str, ...]   # folded real paths: nothing below them may be touched
    hosts: frozenset[str]      # folded real paths of the hosts' folders (named: refused)
    markers: tuple[str, ...]   # folded texts that, found in any input, mean a touch


# Claude Code's settings files in a .claude folder; the files of a host folder that
# $CLAUDE_CONFIG_DIR or $CODEX_HOME moves elsewhere.
_CLAUDE_NAMES = ("settings.json", "settings.local.json")
_MOVED_NAMES = ("settings.json", "settings.local.json", ".claude.json", "config.toml",
                "hooks.json")


def protected(trust_files: Iterable[str], cwd: str) -> Protected:
    """What no tool may touch once teammate text is in the session: the trust files,
    the default trust folder, the sessions' state, and every host's settings and MCP
    configuration in the home folder, in the session's folder and its work tree."""
    home = Path.home()
    projects = {Path(os.path.realpath(cwd)), repo_root(cwd)} if cwd else set()
    files: set[str] = set()
    for host in HOSTS:
        files.update(_resolved(str(f), "/") for f in setup_files(host, "user", home, home))
        for project in projects:
            files.update(_resolved(str(f), "/")
                         for f in setup_files(host, "project", project, home))
    moved = [Path(d).expanduser() for d in (os.environ.get("CLAUDE_CONFIG_DIR", ""),
                                            os.environ.get("CODEX_HOME", "")) if d]
    for folder in moved:
        files.update(_resolved(str(folder / n), "/") for n in _MOVED_NAMES)
    for folder in (home, *projects):
        files.update(_resolved(str(folder / ".claude" / n), "/") for n in _CLAUDE_NAMES)
    trust = [str(Path(t).expanduser()) for t in trust_files]
    files.update(_resolved(t, "/") for t in trust)
    codex = Path(os.environ.get("CODEX_HOME", "") or home / ".codex").expanduser()
    folders = tuple(sorted({_resolved(str(home / ".agentrelay"), "/"),
                            _resolved(str(sessions_root()), "/"),
                            *(_resolved(str(f / "rules"), "/")
                              for f in (codex, *(p / ".codex" for p in projects)))}))
    hosts = {_resolved(str(d), "/") for d in moved}
    for folder in (home, *projects):
        hosts.update(_resolved(str(folder / f), "/") for f in _HOST_FOLDERS)
    return Protected(frozenset(files), folders, frozenset(hosts),
                     tuple(protected_markers(trust)))


def protected_markers(trust_files: Iterable[str]) -> list[str]:
    """Texts that, found in any text of a tool call (both folded, see
    :func:`_normal_text`), mean it touches the trust file, the session state or a
    host's settings."""
    home = str(Path.home())
    markers: set[str] = set()
    for raw in [*trust_files, str(Path(home) / ".agentrelay"), str(sessions_root())]:
        path = Path(raw).expanduser()
        for form in {str(path), os.path.realpath(path)}:
            markers.add(form)
            if form.startswith(home + "/"):
                markers.add("~" + form[len(home):])
                markers.add("$HOME" + form[len(home):])
        markers.add(f"{path.parent.name}/{path.name}")
    markers.update(_SETTINGS)
    return sorted({_fold(m) for m in markers if m.strip("/")})


_VARIABLE = re.compile(r"\$(?:(\w+)|\{(\w+)\})")


def _expand_vars(text: str) -> str:
    """``$NAME`` and ``${NAME}`` replaced by their values in this environment (the
    host's), in one pass; unknown names are left as written."""
    def value(match: re.Match[str]) -> str:
        return os.environ.get(match.group(1) or match.group(2), match.group(0))

    return _VARIABLE.sub(value, text)


_SLASH_DOT = re.compile(r"/(?:\./)+")
_SLASHES = re.compile(r"/{2,}")


def _normal_text(text: str) -> str:
    """``text`` folded, with the spellings a shell or a file system treats alike made
    one: quotes and backslashes dropped, ``${HOME}`` as ``$HOME``, ``/./`` and ``//`` as
    ``/``."""
    folded = _fold(text)
    for quote in ("'", '"', "\\"):
        folded = folded.replace(quote, "")
    folded = folded.replace("${home}", "$home")
    return _SLASHES.sub("/", _SLASH_DOT.sub("/", folded))


def _strings(value: object) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, member in value.items():
            yield str(key)
            yield from _strings(member)
    elif isinstance(value, list):
        for member in value:
            yield from _strings(member)


def _hit(path: str, guard: Protected, *, naming: bool) -> bool:
    """Whether the resolved, folded ``path`` is protected (``naming``: a host folder
    itself counts, as when a shell command names it)."""
    if path in guard.files or (naming and path in guard.hosts):
        return True
    return any(path == f or path.startswith(f + "/") for f in guard.folders)


def _glob_hit(pattern: str, guard: Protected) -> bool:
    targets = [*guard.files, *guard.folders, *guard.hosts]
    return any(fnmatchcase(t, pattern) for t in targets)


def _touches(tool_input: dict[str, Any], cwd: str, guard: Protected,
             extra_paths: Iterable[str] = ()) -> str | None:
    """What protected thing the call touches, if any: a path argument (or a path a
    patch writes) leading there, or a text naming it."""
    for key in ("file_path", "notebook_path", "path"):
        value = tool_input.get(key)
        if isinstance(value, str) and value and _hit(_resolved(value, cwd), guard,
                                                     naming=False):
            return value
    for value in extra_paths:
        if _hit(_resolved(value, cwd), guard, naming=False):
            return value
    for text in _strings(tool_input):
        if len(text) > _NORMALISED_MAX:    # a file's content, not a path: case only
            normal = text.casefold()
        else:
            normal = _normal_text(_expand_vars(text) if "$" in text else text)
        for marker in guard.markers:
            if marker in normal:
                return marker
        looks_like_path = text.startswith(("/", "~")) and len(text) < 4096 \
            and "\x00" not in text and "\n" not in text
        if looks_like_path and _hit(_resolved(text, cwd), guard, naming=True):
            return text
    return None


# gitrelay's own commands that change the trust file or the hosts' setup.
_GITRELAY_COMMANDS = "gitrelay's trust or setup commands"
_GITRELAY_CHANGES = {"setup", "join"}
_TRUST_CHANGES = {"add", "block", "remove"}
_SEPARATORS = {";", "&", "&&", "|", "||", "|&", "(", ")", ";;", "\n"}
_GLOB = re.compile(r"[*?\[]")
_LOOSE_GITRELAY = re.compile(
    r"gitrelay\b.*(?:\b(?:setup|join)\b|\btrust\b.*\b(?:add|block|remove)\b)", re.DOTALL)


def _shell_words(command: str) -> list[str] | None:
    """The command's words as a POSIX shell splits them (quotes removed, ``;``, ``&&``
    and ``|`` words of their own); None when it cannot be split."""
    import shlex

    lexer = shlex.shlex(command[:_SHELL_TEXT_MAX], posix=True, punctuation_chars=";&|()")
    lexer.whitespace_split = True
    lexer.commenters = ""
    try:
        return list(lexer)
    except ValueError:
        return None


def _gitrelay_change(words: list[str]) -> bool:
    """Whether the words run a gitrelay command that changes trust or setup."""
    for at, word in enumerate(words):
        name = _fold(os.path.basename(word))
        if not (name == "gitrelay" or name.startswith("gitrelay.")):
            continue
        rest: list[str] = []
        for later in words[at + 1:]:
            if later in _SEPARATORS:
                break
            rest.append(_fold(later))
        if _GITRELAY_CHANGES & set(rest) or ("trust" in rest and _TRUST_CHANGES & set(rest)):
            return True
    return False


def _shell_touches(command: str, cwd: str, guard: Protected, depth: int = 0) -> str | None:
    """What protected thing a shell command names, word by word as the shell will see
    them (``~`` and variables such as ``$HOME`` or ``$GITRELAY_TRUST`` expanded,
    relative to the session's folder, globs matched), or which gitrelay command
    changing trust or setup it runs. A word that is itself a script (``sh -c '…'``,
    ``eval "…"``) is read the same way."""
    words = _shell_words(command)
    if words is None:
        if _LOOSE_GITRELAY.search(_normal_text(command)):
            return _GITRELAY_COMMANDS
        words = command.split()
    if _gitrelay_change(words):
        return _GITRELAY_COMMANDS
    for word in dict.fromkeys(words):   # each distinct word once
        if depth < 3 and word != command and re.search(r"[\s;&|]", word):
            inner = _shell_touches(word, cwd, guard, depth + 1)
            if inner is not None:
                return inner
        for part in {word, *word.split("=")[1:], *word.split(">")[1:]}:
            if not part or part in _SEPARATORS:
                continue
            if "$" in part:
                part = _expand_vars(part)   # $HOME, $GITRELAY_TRUST, ${CODEX_HOME}
            if not part.startswith(("/", "~", ".")) and "/" not in part:
                continue
            if _GLOB.search(part):
                full = os.path.expanduser(part)
                if not os.path.isabs(full):
                    full = os.path.join(os.path.realpath(cwd or "."), full)
                if _glob_hit(_fold(os.path.normpath(full)), guard):
                    return word
            elif _hit(_resolved(part, cwd), guard, naming=True):
                return word
    return None


# --------------------------------------------------------------------------- deciding


def _shell_command(tool_name: str, tool_input: dict[str, Any]) -> str | None:
    if tool_name not in SHELL_TOOLS:
        return None
    command = _command_text(tool_input)
    if isinstance(command, list):
        import shlex

        command = shlex.join(str(c) for c in command)
    return command.strip() if isinstance(command, str) else None


def _write_approval(tool_name: str, files: list[PatchFile] | None) -> set[str]:
    """The tool names in ``require_approval`` that make this write ask."""
    if files is None:
        return {tool_name}
    names = {"apply_patch"}
    for f in files:
        names.add("Edit" if f.op == "update" else "Write")
    return names


def _short(text: str, limit: int = 80) -> str:
    one = " ".join(text.split())
    return one if len(one) <= limit else one[:limit - 1] + "…"


def _ask(reason: str, refused: str, why: str, next_step: str) -> Decision:
    """An ask: ``reason`` for the person who approves; for the model (where the host
    cannot ask) one line of what was refused, why and what to do next."""
    return Decision("ask", f"gitrelay: {reason}",
                    f"gitrelay refused {refused}: {why}; {next_step}")


def _write_decision(verdict: Verdict, shown: list[str], handoff: str) -> Decision:
    """The words of a write's verdict (``shown``: the paths as the answer names them)."""
    tool = verdict.tool
    listed = ", ".join(verdict.paths)
    if verdict.kind == "allow":
        also = (f"; auto_write_paths wins over {tool} in require_approval"
                if verdict.listed else "")
        return Decision("allow", f"gitrelay: {', '.join(shown)} is within the paths "
                                 f"{handoff} may write without asking (auto_write_paths: "
                                 f"{listed}){also}")
    path = shown[verdict.at] if 0 <= verdict.at < len(shown) else "(no path)"
    approve = f"stop and ask your user to approve {tool} for {path}"
    if verdict.paths:
        why = (f"it is outside the paths your user's trust file lets {handoff} write "
               f"without asking (auto_write_paths: {listed})")
        next_step = f"write under {listed} instead, or {approve}"
    else:
        why = (f"your user's trust file lets {handoff} write no path without asking "
               "(auto_write_paths is empty)")
        next_step = approve
    if verdict.listed:
        why += f", and lists {tool} in require_approval"
    person = (f"{tool} to {path} needs your approval: "
              + why.replace("your user's", "your").replace("it is outside", "outside"))
    refusal = f"gitrelay refused {tool} to {path}: {why}; {next_step}"
    if verdict.kind == "deny":
        return Decision("deny", refusal, refusal)
    return Decision("ask", f"gitrelay: {person}", refusal)


def _one(entry: InProgress, overlay: dict[str, Any], tool_name: str,
         tool_input: dict[str, Any], cwd: str, outside: Kind,
         patch: tuple[list[PatchFile], str] | None) -> Decision:
    handoff = f"the handoff {entry.thread_id[:6]} from {entry.sender}"
    where = cwd or entry.cwd
    command = None if patch is not None else _shell_command(tool_name, tool_input)
    if command is not None:
        if command in (c.strip() for c in entry.test_commands):
            if auto_test_verdict(overlay).kind == "allow":
                return Decision("allow", f"gitrelay: a test command of {handoff}, and your "
                                         "trust file lets it run without asking (auto_test)")
            return _ask(f"a test command of {handoff}; your trust file does not let it run "
                        "without asking (auto_test is false)",
                        f"the test command `{_short(command)}`",
                        f"your user's trust file does not let the test commands of "
                        f"{handoff} run without asking (auto_test is false)",
                        f"stop and ask your user to approve running `{_short(command)}`")
        if "*** begin patch" in command.casefold():
            return _ask(f"while you work on {handoff}, a shell command holding a patch "
                        "needs your approval: gitrelay judges only patches given to the "
                        "host's own patch tool",
                        f"a {tool_name} command holding a patch",
                        f"while you work on {handoff}, gitrelay judges only patches given "
                        "to the host's own patch or edit tools",
                        "write the files with those tools instead, or stop and ask your "
                        "user to approve this command")
    key = WRITE_TOOLS.get(tool_name)
    if patch is None and key is None:
        verdict = tool_verdict(overlay, tool_name)
        if verdict.kind is None:
            return NO_OPINION
        target = f" `{_short(command)}`" if command else ""
        return _ask(f"while you work on {handoff}, {tool_name} needs your approval "
                    "(require_approval in your trust file)",
                    f"{tool_name}{target}",
                    f"your user's trust file lists {tool_name} in require_approval for "
                    f"{handoff}",
                    f"stop and ask your user to approve {tool_name}{target}")
    files = patch[0] if patch is not None else None
    if patch is not None:
        base = os.path.join(where, patch[1]) if patch[1] else where
        paths = [os.path.join(base, f.path) for f in patch[0]]
    else:
        value = tool_input.get(key or "")
        if not isinstance(value, str) or not value:
            raise ValueError(f"{tool_name} input has no {key}")
        paths = [value]
    root = repo_root(where)
    relative = [_relative(path, root, where) for path in paths]
    shown = [rel if rel is not None else path for rel, path in zip(relative, paths, strict=True)]
    label = PATCH_TOOL if patch is not None else tool_name
    verdict = write_verdict(overlay, label, relative,
                            approval_names=_write_approval(tool_name, files), outside=outside,
                            fold_case=ignores_case(root))
    return _write_decision(verdict, shown, handoff)


def _current_overlay(entry: InProgress) -> dict[str, Any]:
    """The overlay recorded at the accept while the trust file is unchanged; else the
    file's judgement of the sender now (:func:`gitrelay.trust.trust.session_overlay`:
    blocked or no longer trusted, every tool asks)."""
    try:
        now: list[int] | None = trust_stamp(entry.trust_file)
    except OSError:
        now = None  # there but unreadable: reading it says why (config_error), and denies
    if now == entry.trust_stamp:
        return entry.overlay
    from gitrelay.trust.trust import load_trust, session_overlay

    return session_overlay(load_trust(Path(entry.trust_file)), entry.sender)


def _protected_refusal(tool_name: str, touched: str, command: str | None) -> Decision:
    """The deny of a call that touches what no tool may once teammate text is in the
    session, worded for the model: a read as a read."""
    if len(touched) > 200:
        touched = touched[:200] + "…"
    what = ("your user's trust file, gitrelay's session state, the host's settings and "
            "MCP configuration")
    if tool_name in READ_TOOLS:
        refusal = (f"gitrelay refused reading {touched}: once a teammate's text is in this "
                   f"session no tool may read or change {what}; carry on without it, and "
                   "ask your user if you need what it holds")
    elif touched == _GITRELAY_COMMANDS:
        refusal = (f"gitrelay refused the command `{_short(command or tool_name)}`: once a "
                   f"teammate's text is in this session no tool may run {touched}; stop "
                   "and ask your user to run it themselves")
    else:
        refusal = (f"gitrelay refused {tool_name} on {touched}: once a teammate's text is in "
                   f"this session no tool may change {what}, or run gitrelay's trust and "
                   "setup commands; leave it as it is, and stop and ask your user to make "
                   "the change themselves")
    return Decision("deny", refusal, refusal)


def decide(state: SessionState | None, tool_name: object, tool_input: object, cwd: object,
           *, outside: Kind = "ask", server: str = "gitrelay",
           host: str = "claude") -> Decision:
    """The guard's answer for one tool call of the session (see the module doc).

    Raises ValueError or :class:`~gitrelay.core.errors.RelayError` when the input or
    the state cannot be judged; the caller denies on any exception.
    """
    if state is None or not (state.exposed or state.in_progress):
        return NO_OPINION
    if not isinstance(tool_name, str) or not tool_name:
        raise ValueError("the hook input has no tool_name")
    if not isinstance(tool_input, dict):
        raise ValueError("the hook input has no tool_input object")
    if tool_name.startswith(f"mcp__{server}__"):
        return NO_OPINION   # gitrelay's own tools write to the relay, never to a file here
    where = cwd if isinstance(cwd, str) else ""
    found = _host_patch(host, tool_name, tool_input)
    patch = None
    if found is not None:
        files = _patch_files(found[0])
        patch = (files, found[1] or "")
    base = os.path.join(where or ".", patch[1]) if patch is not None and patch[1] else where
    guard = protected([*(e.trust_file for e in state.in_progress), trust_file_now()],
                      where or (state.in_progress[0].cwd if state.in_progress else ""))
    written = [os.path.join(base or ".", f.path) for f in patch[0]] if patch else []
    # A patch path spelled from the home folder: judged as if the host expanded it too.
    written += [f.path for f in patch[0] if f.path.startswith("~")] if patch else []
    touched = _touches(tool_input, where, guard, written)
    command = _shell_command(tool_name, tool_input)
    if touched is None and command is not None and patch is None:
        touched = _shell_touches(command, where, guard)
    typed = tool_input.get("chars") if tool_name in STDIN_TOOLS else None
    if touched is None and isinstance(typed, str):
        touched = _shell_touches(typed, where, guard)   # typed into a running shell
    if touched is not None:
        return _protected_refusal(tool_name, touched, command)
    if not state.in_progress:
        return NO_OPINION
    answer = NO_OPINION
    for entry in state.in_progress:
        overlay = _current_overlay(entry)
        if untrusted(overlay):
            answer = answer.stricter(_ask(
                f"{entry.sender} is no longer trusted by your trust file; every call needs "
                "your approval until you close their handoff", tool_name,
                f"{entry.sender} is no longer trusted by your user's trust file, so every "
                f"call needs their approval while their handoff {entry.thread_id[:6]} is "
                "open", f"stop and ask your user to approve {tool_name}, or to close the "
                "handoff"))
            continue
        answer = answer.stricter(_one(entry, overlay, tool_name, tool_input, where, outside,
                                      patch))
    return answer
