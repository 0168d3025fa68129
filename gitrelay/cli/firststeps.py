"""What a person does after ``gitrelay join``: the next steps, as commands to run.

Like ``gh auth login``, joining ends with what is left: whose work to trust
(one command per teammate already on the relay), which coding hosts on this
machine to connect (``gitrelay setup``), and how to check it all
(``gitrelay doctor``).
"""

from __future__ import annotations

from gitrelay.core.errors import RelayError

LISTED_AT_MOST = 8


def _untrusted_teammates(me: str, handles: list[str], trust: str) -> list[str]:
    """The teammates (not ``me``) the trust file neither lists nor blocks."""
    from pathlib import Path

    from gitrelay.relay.policy import is_self
    from gitrelay.relay.trust import load_trust

    try:
        rules = load_trust(Path(trust))
    except RelayError:
        rules = None
    out = []
    for handle in handles:
        if is_self(me, handle):
            continue
        if rules is not None and (rules.entry_for(handle) is not None
                                  or rules.is_blocked(handle)):
            continue
        out.append(handle)
    return out


def _hosts_found() -> tuple[list[str], list[str]]:
    """(hosts installed here without gitrelay set up, hosts already set up)."""
    from gitrelay.relay.hostfiles import HOSTS
    from gitrelay.relay.hosts import gitrelay_executable, host_status

    try:
        exe = gitrelay_executable()
    except RelayError:
        return [], []
    todo, done = [], []
    for host in HOSTS:
        try:
            status = host_status(host, exe)
        except (RelayError, OSError):
            continue
        if status.state == "current":
            done.append(host)
        elif status.installed or status.state == "outdated":
            todo.append(host)
    return todo, done


def join_next_steps(me: str, teammates: list[str], trust: str) -> list[str]:
    """The lines ``join`` ends with."""
    lines = ["", "Next steps:"]
    step = 1
    untrusted = _untrusted_teammates(me, teammates, trust)
    if untrusted:
        lines.append(f"  {step}. Say whose work your agent may accept (docs/trust.md):")
        lines += [f"       gitrelay trust add {h}" for h in untrusted[:LISTED_AT_MOST]]
        if len(untrusted) > LISTED_AT_MOST:
            lines.append(f"       … and {len(untrusted) - LISTED_AT_MOST} more "
                         "(`gitrelay teammates` lists everyone)")
    else:
        lines.append(f"  {step}. When teammates join, trust them: `gitrelay trust add "
                     "HANDLE` (docs/trust.md).")
    step += 1
    todo, done = _hosts_found()
    if todo:
        lines.append(f"  {step}. Connect your coding agent{'s' if len(todo) > 1 else ''} "
                     "found on this machine:")
        lines += [f"       gitrelay setup {host}" for host in todo]
    elif done:
        lines.append(f"  {step}. Your coding agents are connected already "
                     f"({', '.join(done)}).")
    else:
        lines.append(f"  {step}. Connect your coding agent: `gitrelay setup claude`, "
                     "`codex` or `cursor` (none found on this machine yet).")
    step += 1
    lines.append(f"  {step}. Check that it all works:")
    lines.append("       gitrelay doctor")
    return lines
