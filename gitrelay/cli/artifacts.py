"""Artifacts from command-line flags (``--diff``, ``--file``, ``--test``, …)."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from gitrelay.core.errors import InvalidArgument, RelayError

_FILE_RE = re.compile(r"^(?P<path>[^@:]+?)(?:@(?P<sha>[0-9a-fA-F]{4,64}))?"
                      r"(?::(?P<a>\d+)(?:-(?P<b>\d+))?)?$")
_DIFF_HEADER = re.compile(r"^diff --git a/(?P<a>.+?) b/(?P<b>.+)$")


def read_file(name: str, flag: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).expanduser().read_text(encoding="utf-8")
    except OSError as exc:
        raise InvalidArgument(f"{flag} {name}: {exc.strerror or exc}", field=flag) from None
    except UnicodeDecodeError:
        raise InvalidArgument(f"{flag} {name}: not UTF-8 text", field=flag) from None


def split_patch(text: str) -> list[tuple[str, str]]:
    """A unified diff as ``(path, diff)`` per file, paths from its headers."""
    parts: list[tuple[str, list[str]]] = []
    for line in text.splitlines(keepends=True):
        m = _DIFF_HEADER.match(line.rstrip("\n"))
        if m:
            parts.append((m.group("b"), [line]))
            continue
        if line.startswith("--- ") and (not parts or any(
                ln.startswith("@@") for ln in parts[-1][1])):
            parts.append(("", [line]))
            continue
        if line.startswith("+++ ") and parts and not parts[-1][0]:
            target = line[4:].strip().split("\t")[0]
            if target == "/dev/null":
                old = parts[-1][1][-1][4:].strip().split("\t")[0]
                target = old
            parts[-1] = (target[2:] if target[:2] in ("a/", "b/") else target, parts[-1][1])
        if parts:
            parts[-1][1].append(line)
    return [(path, "".join(lines)) for path, lines in parts if path]


def artifacts_from(args: argparse.Namespace, limits: Mapping[str, int]) -> list[dict[str, Any]]:
    """The artifacts the flags give, each checked against the relay's ``limits``."""
    from gitrelay.core import schema

    arts: list[dict[str, Any]] = []
    for spec in args.diff or []:
        path, sep, name = spec.partition("=")
        if sep:
            arts.append({"type": "file_diff", "path": path, "diff": read_file(name, "--diff")})
            continue
        files = split_patch(read_file(spec, "--diff"))
        if not files:
            raise InvalidArgument(f"--diff {spec}: found no file headers (---/+++ or diff --git); "
                                  "use --diff REPO_PATH=PATCH_FILE", field="--diff")
        arts += [{"type": "file_diff", "path": p, "diff": d} for p, d in files]
    for spec in args.file or []:
        m = _FILE_RE.match(spec)
        if not m:
            raise InvalidArgument(f"--file {spec!r}: use PATH, PATH:LINE, PATH:START-END, "
                                  "optionally PATH@SHA:START-END", field="--file")
        art: dict[str, Any] = {"type": "file_ref", "path": m.group("path")}
        if m.group("sha"):
            art["git_sha"] = m.group("sha")
        if m.group("a"):
            art["lines"] = [int(m.group("a"))] + ([int(m.group("b"))] if m.group("b") else [])
        arts.append(art)
    for command in args.test or []:
        art = {"type": "test_command", "command": command}
        if args.test_cwd:
            art["cwd"] = args.test_cwd
        arts.append(art)
    for spec in args.link or []:
        url, _, title = spec.strip().partition(" ")
        art = {"type": "link", "url": url}
        if title.strip():
            art["title"] = title.strip()
        arts.append(art)
    for spec in args.contract or []:
        if re.match(r"^https?://", spec):
            arts.append({"type": "api_contract", "schema_url": spec})
            continue
        inline = json_arg(read_file(spec, "--contract"), f"--contract {spec}")
        if not isinstance(inline, dict):
            raise InvalidArgument(f"--contract {spec}: must hold a JSON object", field="--contract")
        arts.append({"type": "api_contract", "inline": inline})
    for spec in args.artifact or []:
        arts += _artifact_arg(spec)
    for i, art in enumerate(arts):
        try:
            schema.ARTIFACT(art, f"artifact {i + 1} ({art.get('type')})",
                            schema.Ctx(limits))
        except RelayError as exc:
            raise InvalidArgument(exc.message, field=exc.data.get("field", "artifacts")) from None
    return arts


def json_arg(text: str, what: str) -> Any:
    try:
        return json.loads(text)
    except ValueError as exc:
        raise InvalidArgument(f"{what}: not valid JSON ({exc})", field=what) from None


def _artifact_arg(spec: str) -> list[dict[str, Any]]:
    """``TYPE:JSON``, a JSON object with ``type``, or ``@FILE`` holding one or a list."""
    if spec.startswith("@"):
        value = json_arg(read_file(spec[1:], "--artifact"), f"--artifact {spec}")
    else:
        kind, sep, rest = spec.partition(":")
        if sep and re.fullmatch(r"[a-z_]+", kind) and rest.lstrip().startswith("{"):
            value = json_arg(rest, f"--artifact {spec}")
            if isinstance(value, dict):
                value = {"type": kind, **value}
        else:
            value = json_arg(spec, f"--artifact {spec}")
    items = value if isinstance(value, list) else [value]
    if not all(isinstance(v, dict) for v in items):
        raise InvalidArgument(f"--artifact {spec}: an artifact is a JSON object",
                              field="--artifact")
    return items


def add_artifact_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("artifacts (each flag may be repeated)")
    g.add_argument("--diff", action="append", metavar="PATCH|PATH=PATCH",
                   help="a unified diff file (- for stdin), one file_diff per file in it")
    g.add_argument("--file", action="append", metavar="PATH[@SHA][:START[-END]]",
                   help="a file_ref")
    g.add_argument("--test", action="append", metavar="COMMAND", help="a test_command")
    g.add_argument("--test-cwd", metavar="DIR", help="the cwd of every --test")
    g.add_argument("--link", action="append", metavar="'URL [TITLE]'", help="a link")
    g.add_argument("--contract", action="append", metavar="URL|FILE.json",
                   help="an api_contract: a schema URL, or an inline JSON contract file")
    g.add_argument("--artifact", action="append", metavar="TYPE:JSON|JSON|@FILE",
                   help="any artifact as JSON, e.g. 'link:{\"url\": \"https://…\"}'")
