"""Where each coding host keeps what ``gitrelay setup`` writes.

For every host, two files: the one holding the MCP server's entry and the one
holding the hooks, in the home folder (``user`` scope) or in a project. The setup
(:mod:`gitrelay.hosts.settings`) writes them; the guard (:mod:`gitrelay.hosts.guard`)
keeps every tool away from them while a handoff is in progress, since either could
point the agent's gitrelay at other trust rules or remove the hooks. Standard
library only: the guard reads this on every tool call.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from gitrelay.core.errors import ConfigError, NextStep
from gitrelay.core.vocab import HOSTS

__all__ = ["HOSTS", "PROGRAMS", "Scope", "all_setup_names", "setup_files"]

Scope = Literal["user", "project"]
SCOPES: tuple[Scope, ...] = ("user", "project")
PROGRAMS: dict[str, tuple[str, ...]] = {
    "claude": ("claude",), "codex": ("codex",), "cursor": ("cursor-agent", "cursor")}
"""The commands each host installs: one of them on PATH means the host is on this machine."""


def setup_files(host: str, scope: Scope, cwd: Path, home: Path | None = None
                ) -> tuple[Path, Path]:
    """(the file with the MCP entry, the file with the hooks) of ``host``."""
    home = Path.home() if home is None else home
    if host == "claude":
        if scope == "user":
            return home / ".claude.json", home / ".claude" / "settings.json"
        return cwd / ".mcp.json", cwd / ".claude" / "settings.local.json"
    base = home if scope == "user" else cwd
    if host == "codex":
        return base / ".codex" / "config.toml", base / ".codex" / "hooks.json"
    if host == "cursor":
        return base / ".cursor" / "mcp.json", base / ".cursor" / "hooks.json"
    raise ConfigError(f"unknown host {host!r}; one of {', '.join(HOSTS)}", field="host",
                      next_step=NextStep.FIX_ARGUMENT)


def all_setup_names() -> list[str]:
    """Every such file of every host and scope, named from its folder (``.mcp.json``,
    ``.cursor/hooks.json``): how a tool call names one, wherever it lives."""
    root = Path("/")
    names = {str(p.relative_to(root)) for host in HOSTS for scope in SCOPES
             for p in setup_files(host, scope, root, root)}
    return sorted(names)
