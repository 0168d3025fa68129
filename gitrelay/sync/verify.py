"""``gitrelay verify``: the gate's rules over a relay's whole history.

For hosts where no hook can be installed (and to audit one where it can),
this runs the very rules the pre-receive gate runs — :func:`rules.check_commit`
on every commit of ``main`` from the root commit, :func:`rules.check_inbox_commit`
on every commit of every per-user ref — and lists every ref outside the
relay's namespaces. A local relay is read in place through one
``git cat-file --batch``; any other URL is first cloned (``git clone
--mirror``, so every ref comes along) into a temporary directory that is
removed afterwards.

Each commit of ``main`` is judged against the state its parent left, so every
forged commit is reported, not only the first; the report also says up to
which commit ``main`` is valid (what verify-on-read clients stop at).

What a snapshot cannot show: a ref that was rewound or deleted (the gate
refuses both; the relay's reflog, if the host keeps one, records them) and
who pushed (the pusher rule needs the server's word, which only the gate has).
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from gitrelay.core import layout
from gitrelay.core.commits import commit_seq
from gitrelay.core.errors import (
    ConfigError,
    InvalidArgument,
    NextStep,
    RelayError,
    RelayUnavailable,
)
from gitrelay.core.gitcli import CatFile, git_failure, hermetic_env, run_git
from gitrelay.core.objects import Commit, Objects, first_parent_chain
from gitrelay.core.rules import check_inbox_commit
from gitrelay.core.sshcmd import relay_ssh_env
from gitrelay.core.terminal import shown
from gitrelay.core.view import RelayView
from gitrelay.store import config
from gitrelay.sync.parallel import invalid_commits

# Refs a hosting service makes itself (pull/merge requests, pipelines): not pushed
# by teammates, so not the relay's business.
HOST_REF_PREFIXES = ("refs/pull/", "refs/merge-requests/", "refs/keep-around/",
                     "refs/pipelines/", "refs/environments/")
MAX_PROBLEMS = 200


@dataclass(frozen=True)
class Problem:
    """One rule broken: by ``commit`` (a full id; empty for a ref-level problem) on ``ref``."""

    commit: str
    rule: str
    message: str
    ref: str = layout.MAIN_REF

    def line(self) -> str:
        at = f" at {self.commit[:12]}" if self.commit else ""
        return f"{self.ref}{at}: [{self.rule}] {self.message}"


@dataclass
class VerifyReport:
    """What :func:`verify_relay` found. ``checked`` counts the commits checked."""

    relay: str
    checked: int = 0
    problems: list[Problem] = field(default_factory=list)
    refs: dict[str, int] = field(default_factory=dict)
    valid_until: str | None = None  # the last commit of main before its first problem
    truncated: bool = False
    tip: str | None = None  # main's commit as read

    @property
    def ok(self) -> bool:
        return not self.problems

    def add(self, problem: Problem) -> None:
        if problem in self.problems:
            return
        if len(self.problems) >= MAX_PROBLEMS:
            self.truncated = True
            return
        self.problems.append(problem)

    def text(self) -> str:
        lines = [f"gitrelay verify: {self.relay}"]
        for ref, count in self.refs.items():
            lines.append(f"  {ref}: {count} commit{'s' if count != 1 else ''} checked")
        where = f"{self.checked} commit{'s' if self.checked != 1 else ''} on " \
                f"{len(self.refs)} ref{'s' if len(self.refs) != 1 else ''}"
        if self.ok:
            lines.append(f"OK: {where} follow the relay's rules.")
            if self.tip:
                lines.append(f"main is at {self.tip} (what --expect-tip pins)")
            return "\n".join(lines)
        lines.append(f"PROBLEMS: {len(self.problems)}{'+' if self.truncated else ''} in {where}:")
        lines += [f"  {p.line()}" for p in self.problems]
        main_problems = [p for p in self.problems if p.ref == layout.MAIN_REF]
        if main_problems and self.valid_until:
            lines.append(f"main is valid up to {self.valid_until[:12]}; clients stop there "
                         "(verify-on-read) until the relay is repaired.")
        lines.append("Rules: docs/gate-rules.md.")
        return "\n".join(lines)


def verify_relay(relay_url_or_path: str | None, *, expect_tip: str | None = None
                 ) -> VerifyReport:
    """Check a relay's whole history against the gate's rules.

    ``None`` means the configured relay (``gitrelay join``), else the embedded
    default relay if there is one. ``expect_tip``: a commit main must still
    contain (one verified before): a history rewritten since is a problem, even
    when the new history follows every rule. Raises RelayUnavailable when the
    relay cannot be read, ConfigError when none is configured.
    """
    relay = relay_url_or_path if relay_url_or_path is not None else _configured_relay()
    if not relay or relay.startswith("-"):
        raise InvalidArgument(f"{relay!r} is not a relay path or URL", field="relay")
    if expect_tip is not None:
        check_pin(expect_tip)
    git_dir = _local_git_dir(relay)
    if git_dir is not None:
        return _pinned(_verify_git_dir(relay, git_dir), git_dir, expect_tip)
    with tempfile.TemporaryDirectory(prefix="gitrelay-verify-") as tmp:
        clone = Path(tmp) / "relay.git"
        proc = run_git(["clone", "--mirror", "--quiet", "--", relay, str(clone)],
                       env=relay_ssh_env(relay, hermetic_env(), config.home()))
        if proc.returncode != 0:
            reason, ssh = git_failure(proc.stderr, relay)
            raise RelayUnavailable(f"cannot clone {relay}: {reason}", relay=relay,
                                   next_step=NextStep.FIX_SSH if ssh else
                                   NextStep.CHECK_RELAY_URL, **ssh)
        return _pinned(_verify_git_dir(relay, clone), clone, expect_tip)


PIN_LENGTHS = (40, 64)  # a full commit id: SHA-1, SHA-256


def check_pin(pin: str, flag: str = "--expect-tip") -> str:
    """``pin`` when it is a full commit id (40 hex digits, 64 on a SHA-256 relay),
    else InvalidArgument: a prefix of a few digits can be matched by a commit an
    attacker grinds in seconds, so only the whole id pins anything."""
    if len(pin) not in PIN_LENGTHS or any(c not in "0123456789abcdefABCDEF" for c in pin):
        shown_pin = repr(pin) if len(pin) <= 80 else repr(pin[:77] + "...")
        raise InvalidArgument(
            f"{flag} {shown_pin} is not a full commit id: a pin is all 40 hex digits of one "
            "(64 on a SHA-256 relay), since a shorter prefix can be matched by a forged "
            "commit", next_step=NextStep.GET_PIN, field="expect_tip")
    return pin.lower()


def read_tip_file(path: Path) -> str | None:
    """The pin kept in ``path``: None when the file does not exist yet (the first run),
    else its commit id; an empty, unreadable or malformed file is InvalidArgument, never
    "no pin" (a pin that quietly vanished would let a rewritten history through)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidArgument(f"--tip-file {path} cannot be read ({exc}); nothing was "
                              "verified against it", field="--tip-file") from None
    if not text.strip():
        raise InvalidArgument(f"--tip-file {path} is empty: it should hold the commit id of "
                              "the last verified main; nothing was verified against it",
                              next_step=NextStep.RESET_TIP_FILE, field="--tip-file",
                              path=str(path))
    return check_pin(text.strip(), f"--tip-file {path}: its pin")


def pin_problem(git_dir: Path, pin: str, tip: str | None) -> str | None:
    """Why main at ``tip`` does not contain the pinned commit ``pin``, or None when it
    does (``pin`` is ``tip`` or one of its ancestors)."""
    env = hermetic_env()
    proc = run_git(["rev-parse", "--verify", "--quiet", f"{check_pin(pin)}^{{commit}}"],
                   git_dir=git_dir, env=env)
    full = proc.stdout.decode().strip() if proc.returncode == 0 else ""
    rewritten = "its history was rewritten since that commit was verified, or the pin is wrong"
    if not full:
        return f"main does not contain the pinned commit {pin} (no such commit): {rewritten}"
    if tip is None:
        return f"the relay has no main to hold the pinned commit {full[:12]}"
    if full == tip:
        return None
    proc = run_git(["merge-base", "--is-ancestor", full, tip], git_dir=git_dir, env=env)
    if proc.returncode == 0:
        return None
    return f"main ({tip[:12]}) does not descend from the pinned commit {full[:12]}: {rewritten}"


def _pinned(report: VerifyReport, git_dir: Path, pin: str | None) -> VerifyReport:
    if pin is not None:
        problem = pin_problem(git_dir, pin, report.tip)
        if problem:
            report.add(Problem(report.tip or "", "pin", problem))
    return report


def _configured_relay() -> str:
    from gitrelay.store.config import default_relay_path, load_user_config

    cfg = load_user_config()
    if cfg is not None:
        return cfg.relay
    default = default_relay_path()
    if (default / "HEAD").exists():
        return str(default)
    raise ConfigError("no relay to verify: none is configured and there is no default relay",
                      next_step=NextStep.GIVE_RELAY)


def _local_git_dir(relay: str) -> Path | None:
    """The git directory of a relay given as a local path, or None for a URL."""
    if "://" in relay:
        return None
    path = Path(relay).expanduser()
    if not path.exists():
        if ":" in relay.split("/", 1)[0]:
            return None  # scp-like user@host:path
        raise RelayUnavailable(f"there is no relay at {relay}", relay=relay,
                               next_step=NextStep.CHECK_RELAY_URL)
    if (path / "HEAD").is_file() and (path / "objects").is_dir():
        return path
    proc = run_git(["-C", str(path), "rev-parse", "--absolute-git-dir"], env=hermetic_env())
    if proc.returncode != 0:
        raise RelayUnavailable(f"{relay} is not a git repository", relay=relay,
                               next_step=NextStep.CHECK_RELAY_URL)
    return Path(proc.stdout.decode().strip())


def _verify_git_dir(relay: str, git_dir: Path) -> VerifyReport:
    env = hermetic_env()
    proc = run_git(["for-each-ref", "--format=%(refname) %(objectname)"], git_dir=git_dir,
                   env=env)
    if proc.returncode != 0:
        raise RelayUnavailable(f"cannot list the refs of {relay}: {_last_line(proc.stderr)}")
    refs: dict[str, str] = {}
    for line in proc.stdout.decode(errors="surrogateescape").splitlines():
        name, _, oid = line.rpartition(" ")
        if name and not name.startswith(HOST_REF_PREFIXES):
            refs[name] = oid
    report = VerifyReport(relay)
    with CatFile(git_dir, env=env) as source:
        objs = Objects(source)
        main_tip = refs.get(layout.MAIN_REF)
        report.tip = main_tip
        tip_commit = _verify_main(git_dir, objs, main_tip, report) if main_tip else None
        if main_tip is None:
            report.add(Problem("", "layout", f"the relay has no {layout.MAIN_REF}"))
        for name in sorted(refs):
            if name == layout.MAIN_REF:
                continue
            owner = layout.inbox_ref_owner(name)
            if owner is None:
                report.add(Problem("", "ref-namespace", f"{shown(name)} is outside the relay's ref "
                                   f"namespaces ({layout.MAIN_REF}, {layout.USERS_REF_PREFIX}"
                                   f"<handle>/{layout.INBOX_REF_LEAF})", shown(name)))
            elif tip_commit is not None:
                _verify_inbox(objs, name, owner, refs[name], tip_commit, report)
    return report


def _chain(objs: Objects, tip: str, ref: str, report: VerifyReport) -> list[Commit]:
    """Commits from the root to ``tip`` by first parents, oldest first, up to the first
    that cannot be parsed, which is a problem of ``report``."""
    chain = first_parent_chain(objs, tip)
    if chain.bad is not None:
        problem = chain.problem
        if isinstance(problem, RelayError):
            report.add(Problem(chain.bad, str(problem.data.get("rule", problem.name)),
                               problem.message, ref))
        else:
            report.add(Problem(chain.bad, "objects", f"commit {chain.bad[:12]} cannot be "
                               f"read: {problem}", ref))
    return chain.commits


def _verify_main(git_dir: Path, objs: Objects, tip: str, report: VerifyReport
                 ) -> Commit | None:
    unparsed = VerifyReport(report.relay)
    try:
        commits = _chain(objs, tip, layout.MAIN_REF, unparsed)
    except (KeyError, ValueError) as exc:
        report.add(Problem(tip, "objects", f"cannot read the history of main: {exc}"))
        return None
    report.refs[layout.MAIN_REF] = len(commits) + len(unparsed.problems)
    report.checked += len(commits) + len(unparsed.problems)
    # Each commit against its parent, whether or not the parent broke a rule; a long
    # history on several processes (gitrelay.sync.parallel).
    invalid = invalid_commits(git_dir, objs, commits, None, limit=MAX_PROBLEMS + 1)
    for found in invalid:
        report.add(Problem(commits[found.index].oid, found.rule, found.message))
    for problem in unparsed.problems:  # newer than every commit above
        report.add(problem)
    first = invalid[0].index if invalid else len(commits)
    if first:
        report.valid_until = commits[first - 1].oid
    # The inbox refs are checked against the newest commit the history reaches.
    return commits[-1] if commits else None


def _verify_inbox(objs: Objects, ref: str, owner: str, tip: str, main_tip: Commit,
                  report: VerifyReport) -> None:
    try:
        commits = _chain(objs, tip, ref, report)
        main_seq = commit_seq(main_tip)
        view = RelayView(objs, main_tip.tree)
    except (KeyError, ValueError, RelayError) as exc:
        report.add(Problem(tip, "objects", f"cannot read {ref}: {exc}", ref))
        return
    report.refs[ref] = len(commits)
    for commit in commits:
        report.checked += 1
        try:
            check_inbox_commit(objs, commit, owner, main_seq, view,
                               verify_signature=_verify_signature)
        except RelayError as exc:
            report.add(Problem(str(exc.data.get("commit") or commit.oid),
                               str(exc.data.get("rule", exc.name)), exc.message, ref))


def _verify_signature(commit: Commit, actor: str, keys: list[str]) -> str | None:
    # Imported only for relays that require signatures.
    from gitrelay.core.signing import verify_commit_signature

    return verify_commit_signature(commit, actor, keys)


def _last_line(data: bytes) -> str:
    lines = [ln.strip() for ln in data.decode(errors="replace").splitlines() if ln.strip()]
    return lines[-1] if lines else "unknown error"
