"""`gitrelay doctor`: check a person's setup and say how to fix each problem.

Each check is a :class:`Check` (ok, note or problem, with the fix); the command
line prints them (``gitrelay doctor``, ``--json``). A companion of :mod:`gitrelay.cli.admin`:
it reads the config, the relay, its gate, the trust file and the local index, and
changes nothing but what a fetch brings.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gitrelay.cli.wording import next_step_text
from gitrelay.core.commits import commit_seq
from gitrelay.core.errors import IndexLost, NextStep, RelayError, next_step_of
from gitrelay.core.gitcli import hermetic_env
from gitrelay.hosts.hostfiles import HOSTS
from gitrelay.hosts.settings import env_inside_repository, gitrelay_executable, host_status
from gitrelay.inbox.inbox import check_inbox
from gitrelay.relay.client import RelayClient
from gitrelay.relay.history import queued
from gitrelay.relay.joining import RELAY_GC_AUTO
from gitrelay.store.config import config_path, load_user_config
from gitrelay.trust.trust import TrustRules, load_trust
from gitrelay.trust.trustedit import judge_all


@dataclass
class Check:
    """One line of the report: what was checked, how it stands, and the fix."""

    name: str
    level: str  # ok | note | problem
    detail: str
    fix: str = ""


def trust_typo_checks(client: RelayClient | None, rules: TrustRules) -> list[Check]:
    """A note for trusted handles nobody registered on this relay: a typo trusts nobody."""
    if client is None or client.mirror.main() is None:
        return []
    judged = judge_all(rules, [str(p["handle"]) for p in client.teammates()], client.handle)
    strangers = sorted(j["handle"] for j in judged
                       if j["registered"] is False and j["reason"] == "listed")
    if not strangers:
        return []
    return [Check("trust", "note", f"listed but not registered on {client.relay_url}: "
                  f"{', '.join(strangers)}", "a typo trusts nobody: `gitrelay trust remove "
                  "HANDLE`, then `gitrelay trust add` the right one (or they have not "
                  "joined yet)")]


# From this many threads closed ARCHIVE_HINT_DAYS ago or more still in main's tree,
# doctor suggests `gitrelay archive`.
ARCHIVE_HINT_THREADS = 200
ARCHIVE_HINT_DAYS = 14


def archive_checks(client: RelayClient) -> list[Check]:
    """A note when many closed threads are still in main's tree (each push reads them)."""
    closed = client.archivable(older_than=ARCHIVE_HINT_DAYS * 86400.0)
    if len(closed) < ARCHIVE_HINT_THREADS:
        return []
    return [Check("archive", "note", f"{len(closed)} threads closed {ARCHIVE_HINT_DAYS} days "
                  "ago or more are still in main's tree, and every push reads them all",
                  "gitrelay archive (daily, from any one machine; docs/deploying.md)")]


def gate_checks(relay_url: str) -> list[Check]:
    path = Path(relay_url[len("file://"):] if relay_url.startswith("file://") else relay_url)
    if ("://" in relay_url and not relay_url.startswith("file://")) or re.match(
            r"^[\w.-]+@[\w.-]+:", relay_url) or not (path / "HEAD").exists():
        return [Check("gate", "note", "the relay is remote: its hooks cannot be inspected "
                      "from here",
                      "make sure the gate is deployed (docs/deploying.md); where the host "
                      f"runs no hooks (GitHub.com), run `gitrelay verify {relay_url}` "
                      "regularly")]
    hook = path / "hooks" / "pre-receive"
    reinstall = (f"{sys.executable} -c \"from pathlib import Path; from gitrelay.relay.joining "
                 f"import install_hook; install_hook(Path('{path}'))\"")
    if not hook.exists():
        return [Check("gate", "problem", f"{hook} is missing: pushes are not checked",
                      reinstall)]
    if not os.access(hook, os.X_OK):
        return [Check("gate", "problem", f"{hook} is not executable", f"chmod +x {hook}")]
    try:
        text = hook.read_text(errors="replace")
    except OSError as exc:
        return [Check("gate", "problem", f"cannot read {hook}: {exc.strerror}")]
    if "gitrelay.hook.gate" in text:
        from gitrelay.core.vocab import GATE_ALIAS_REMOVED_IN as REMOVED_IN

        return [Check("gate", "note", f"{hook} runs gitrelay.hook.gate, the gate's name "
                      "before it moved to gitrelay.gate.gate; it still gates pushes through that "
                      f"name, which gitrelay {REMOVED_IN} removes: from then on such a hook "
                      "refuses every push until it is reinstalled", reinstall)]
    if "gitrelay.gate.gate" not in text:
        return [Check("gate", "problem", f"{hook} does not run gitrelay.gate.gate", reinstall)]
    env = hermetic_env({"GIT_DIR": str(path)})
    try:
        proc = subprocess.run([str(hook)], input=b"", capture_output=True, cwd=path, env=env,
                              timeout=30, check=False)
    except OSError as exc:
        return [Check("gate", "problem", f"{hook} cannot start: {exc.strerror}", reinstall)]
    if proc.returncode != 0:
        err = proc.stderr.decode(errors="replace").strip().splitlines()
        return [Check("gate", "problem", f"{hook} fails to run: "
                      f"{err[-1] if err else 'exit ' + str(proc.returncode)}", reinstall)]
    return [Check("gate", "ok", f"{hook} runs gitrelay.gate.gate"), *housekeeping_checks(path)]


def head_checks(relay_url: str, env: dict[str, str]) -> list[Check]:
    """A note when the relay's HEAD is not main (gitolite and some forges make new
    repositories with HEAD at master): a plain `git clone` then checks nothing out."""
    from gitrelay.core.gitcli import run_git
    from gitrelay.core.layout import MAIN_REF

    proc = run_git(["ls-remote", "--symref", relay_url, "HEAD"], env=env, timeout=60.0)
    if proc.returncode != 0:
        return []  # unreadable: the relay check says why
    lines = proc.stdout.decode(errors="replace").splitlines()
    # No line at all: HEAD names a branch the relay does not have (an unborn master).
    target = lines[0][len("ref: "):].split("\t")[0] if lines and lines[0].startswith("ref: ") \
        else "a branch the relay does not have" if not lines else "no branch"
    if target == MAIN_REF:
        return []
    return [Check("head", "note", f"the relay's HEAD points at {target}, not {MAIN_REF}: "
                  "gitrelay works, but a plain `git clone` of the relay checks nothing out",
                  f"on the server: git --git-dir <the relay> symbolic-ref HEAD {MAIN_REF} "
                  "(gitolite: docs/deploying.md, \"gitolite\")")]


# git's own threshold when gc.auto is not set.
GIT_GC_AUTO_DEFAULT = 6700


def housekeeping_checks(relay: Path) -> list[Check]:
    """A note when a local relay packs pushed objects later than `gitrelay init` sets it
    to, or never: receive-pack reads loose objects more slowly on every push."""
    proc = subprocess.run(["git", "--git-dir", str(relay), "config", "--get", "gc.auto"],
                          capture_output=True, text=True, check=False)
    try:
        value = int(proc.stdout.strip()) if proc.returncode == 0 else GIT_GC_AUTO_DEFAULT
    except ValueError:
        return []  # git itself will say what is wrong with the setting
    if 0 < value <= RELAY_GC_AUTO:
        return []
    detail = ("git never packs the relay's pushed objects (gc.auto 0)" if value <= 0 else
              f"git packs the relay's pushed objects only once about {value:,} are loose")
    return [Check("packing", "note", f"{detail}; pushes read loose ones more slowly",
                  f"git --git-dir {relay} config gc.auto {RELAY_GC_AUTO} "
                  "(docs/deploying.md, \"Keeping pushes fast\")")]


def diagnose(open_client: Callable[[], RelayClient], trust_path: Path, *,
             flags: bool) -> list[Check]:
    """Every check, in the order a person fixes them: git, the saved config (``flags``:
    --relay or --as were given instead), the relay and the person's registration on it,
    its gate, the trust file, the inbox index and the outbox. ``open_client`` opens the
    person's client without fetching; it may raise RelayError."""
    checks: list[Check] = []
    git = shutil.which("git")
    if git is None:
        checks.append(Check("git", "problem", "the git command is not installed",
                            "install git 2.30 or newer"))
        return checks
    version = subprocess.run([git, "--version"], capture_output=True, text=True,
                             check=False).stdout.strip()
    checks.append(Check("git", "ok", version))

    try:
        cfg = load_user_config()
    except RelayError as exc:
        cfg = None
        checks.append(Check("config", "problem", exc.message, next_step_text(exc)))
    else:
        if cfg is not None:
            checks.append(Check("config", "ok", f"{config_path()}: {cfg.handle} on {cfg.relay}"))
        elif flags:
            checks.append(Check("config", "note", f"no {config_path()}; using the flags"))
        else:
            checks.append(Check("config", "problem", f"no {config_path()}: gitrelay does "
                                "not know who you are or which relay to use",
                                "gitrelay join RELAY_URL --as you@team --name \"Your Name\" "
                                "--role ROLE"))

    client = None
    try:
        client = open_client()
    except RelayError as exc:
        checks.append(Check("relay", "problem", exc.message, next_step_text(exc)))
    if client is not None:
        try:
            report = client.sync.syncer.fetch()
            main = client.mirror.relay_main()
            seq = commit_seq(client.mirror.objects.commit(main)) if main else 0
            checks.append(Check("relay", "ok", f"{client.relay_url} is reachable "
                                f"(last operation #{seq}, {report.fetched} new)"))
            if report.verify_problem:
                checks.append(Check("history", "problem", f"a commit on the relay breaks the "
                                    f"rules: {report.verify_problem}",
                                    f"run `gitrelay verify {client.relay_url}`; the gate is "
                                    "missing or was bypassed on the server"))
            profile = client.mirror.view().profile(client.handle)
            if profile is None:
                checks.append(Check("registered", "problem", f"{client.handle} is not "
                                    "registered on the relay",
                                    f"gitrelay join {client.relay_url} --as {client.handle} "
                                    "--name \"Your Name\" --role ROLE"))
            else:
                checks.append(Check("registered", "ok", f"{profile['handle']}: "
                                    f"{profile['name']} ({profile['role']})"))
            checks += archive_checks(client)
            checks += head_checks(client.relay_url, client.sync.syncer.env)
        except RelayError as exc:
            client_ok = client.mirror.main() is not None
            checks.append(Check("relay", "problem", f"cannot fetch: {exc.message}",
                                # ssh's own reason has its own fix
                                (next_step_text(exc).rstrip(".")
                                 if next_step_of(exc) is NextStep.FIX_SSH
                                 else "check the URL (`gitrelay whoami`) and your access: "
                                 f"git ls-remote {client.relay_url}")
                                + ("; until then your local copy is used" if client_ok
                                   else "")))
        checks += gate_checks(client.relay_url)

    try:
        rules = load_trust(trust_path)
    except RelayError as exc:
        checks.append(Check("trust", "problem", exc.message, next_step_text(exc) or
                            f"fix {trust_path} (docs/trust.md)"))
    else:
        if trust_path.exists():
            checks.append(Check("trust", "ok", f"{trust_path}: {len(rules.teammates)} "
                                f"teammate(s) listed, {len(rules.blocked)} blocked, unknown "
                                f"senders: {rules.unknown_teammates.policy}"))
            checks += trust_typo_checks(client, rules)
        else:
            checks.append(Check("trust", "problem", f"no {trust_path}: the strict defaults "
                                "apply, so every handoff sent to you is refused until you "
                                "list its sender",
                                "list each teammate you trust with `gitrelay trust add "
                                "HANDLE` (docs/trust.md)"))

    if client is not None and client.mirror.main() is not None:
        try:
            page = check_inbox(client, limit=1)
            checks.append(Check("index", "ok", "the inbox index answers"
                                + (" (it was rebuilt just now)" if page.index_rebuilt else "")))
        except NotImplementedError:
            checks.append(Check("index", "note", "this build has no inbox index yet"))
        except IndexLost as exc:
            checks.append(Check("index", "problem", exc.message, "gitrelay reindex"))
        except RelayError as exc:
            checks.append(Check("index", "problem", exc.message,
                                next_step_text(exc) or "gitrelay reindex"))
        pending = queued(client.mirror)
        if pending:
            checks.append(Check("outbox", "note", f"{len(pending)} operation(s) queued, "
                                "not yet on the relay",
                                "gitrelay status --deliver (and see why with gitrelay status)"))
        refused = client.mirror.refused()
        if refused:
            checks.append(Check("refused", "note", f"{len(refused)} operation(s) were refused "
                                "by the relay", "gitrelay status shows which and why; "
                                "`gitrelay status --clear-refused` forgets them"))
    try:
        exe = gitrelay_executable()
    except RelayError as exc:
        checks.append(Check("hosts", "note", exc.message, next_step_text(exc)))
    else:
        checks += host_checks(exe)
    return checks


def host_checks(exe: str, cwd: Path | None = None) -> list[Check]:
    """A line for each installed host, and for any other host gitrelay is set up in,
    judged as ``setup --dry-run`` judges it from this folder
    (:func:`~gitrelay.hosts.settings.host_status`); and a problem for each gitrelay
    entry whose ``env`` points the trust file or gitrelay's home inside the repository
    (:func:`~gitrelay.hosts.settings.env_inside_repository`). ``exe`` is the ``gitrelay``
    command (:func:`~gitrelay.hosts.settings.gitrelay_executable`)."""
    checks = []
    for host in HOSTS:
        status = host_status(host, exe, cwd=cwd)
        flag = " --project" if status.scope == "project" else ""
        if status.state == "current":
            checks.append(Check(host, "ok", status.detail))
        elif status.error is not None and next_step_of(status.error) is not None:
            checks.append(Check(host, "problem", status.detail, next_step_text(status.error)))
        elif status.state == "outdated":
            checks.append(Check(host, "problem", status.detail, f"gitrelay setup {host}{flag}"))
        elif status.installed:
            checks.append(Check(host, "note", f"{host} is installed; {status.detail} for it",
                                f"gitrelay setup {host}"))
        for path, name, value, repository in env_inside_repository(host, cwd):
            checks.append(Check(host, "problem", f"{path}: gitrelay's server entry sets "
                                f"{name}={value}, inside the repository {repository}: whoever "
                                "commits there chooses what your agent trusts",
                                f"take {name} out of that entry, or point it outside the "
                                f"repository (`gitrelay setup {host} --project --replace` "
                                "writes the standard entry)"))
    return checks
