"""Fetch and push between a mirror and the relay, through the ``git`` CLI.

``fetch`` brings the relay's refs into a quarantine namespace, checks every
new commit with the gate's rules (verify-on-read: on a host without hooks a
forged commit stops the mirror at the last valid one), then moves the
mirror's ``refs/relay/*`` and replays the outbox if the relay moved.

``deliver`` pushes the whole outbox in one atomic push (group commit: every
queued operation of every local process goes in one fetch–replay–push
cycle). A non-fast-forward refusal means another writer won: fetch, replay,
retry with bounded backoff and jitter. A gate refusal names the commit and
rule: that operation is dropped and recorded, the rest retried. When the
relay is unreachable the outbox stays as it is.
"""

from __future__ import annotations

import getpass
import os
import random
import re
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pygit2

from gitrelay.core import faults, layout
from gitrelay.core.commits import commit_seq
from gitrelay.core.errors import (
    REFUSAL_PREFIX,
    GateRefused,
    NextStep,
    RelayError,
    RelayUnavailable,
    error_for_rule,
)
from gitrelay.core.gitcli import git_failure, hermetic_env, run_git
from gitrelay.core.objects import ZERO_OID, first_parent_chain
from gitrelay.core.ops import now_iso
from gitrelay.core.rules import check_inbox_commit
from gitrelay.core.sshcmd import relay_ssh_env
from gitrelay.core.view import RelayView
from gitrelay.store import config
from gitrelay.store.gitstore import Store
from gitrelay.store.mirror import (
    FETCHED_MAIN,
    FETCHED_USERS,
    RELAY_MAIN,
    RELAY_USERS,
    Mirror,
    Refused,
)
from gitrelay.sync import localrelay
from gitrelay.sync.gitfetch import fetch_argv
from gitrelay.sync.localrelay import local_relay_dir, signature_checker
from gitrelay.sync.parallel import first_invalid

MAX_ATTEMPTS = 30


_REFUSAL_RE = re.compile(re.escape(REFUSAL_PREFIX) +
                         r" (\S+?)(?: at ([0-9a-f]{12}))?: \[([\w-]+)\] (.*)$")

InboxMerger = Callable[[Mirror, str | None, str], str | None]
# From this many fetched commits on, the fetch says how many it checks (a first fetch
# of a long history takes a while; a person joining should know why).
PROGRESS_FROM = 1000


@dataclass
class SyncReport:
    fetched: int = 0
    delivered: int = 0
    refused: list[Refused] = field(default_factory=list)
    attempts: int = 0
    verify_problem: str | None = None


def take_remote_inbox(mirror: Mirror, local: str | None, remote: str) -> str | None:
    return remote


class Syncer:
    def __init__(self, mirror: Mirror, url: str, *, env: dict[str, str] | None = None,
                 inbox_merger: InboxMerger = take_remote_inbox,
                 progress: Callable[[str], None] | None = None) -> None:
        """``progress``, if given, hears what a long fetch is doing, for a person to read."""
        self.mirror = mirror
        self.url = url
        self.env = relay_ssh_env(url, hermetic_env(env), config.home(), mirror.path)
        self.inbox_merger = inbox_merger
        self.progress = progress
        self._relay_store: Store | None = None  # a relay on a local path, opened once

    # --- fetch ------------------------------------------------------------------

    def _git(self, *args: str, timeout: float = 120.0) -> tuple[int, str, str]:
        proc = run_git(list(args), git_dir=self.mirror.path, env=self.env, timeout=timeout)
        return proc.returncode, proc.stdout.decode(errors="replace"), \
            proc.stderr.decode(errors="replace")

    def fetch(self) -> SyncReport:
        with self.mirror.sync_lock:
            return self._fetch()

    def _fetch(self) -> SyncReport:
        if self._copy_from_local_relay():
            return self._take_fetched()
        code, _, err = self._git(*fetch_argv(self.url))
        if code != 0:
            reason, ssh = git_failure(err, self.url)
            self.mirror.update_sync_state(last_error=reason, last_error_at=time.time())
            if _no_main(reason):
                raise RelayUnavailable(_NO_MAIN.format(url=self.url), relay=self.url,
                                       next_step=NextStep.NOT_A_RELAY)
            ssh = _without_a_key(ssh, self.env)
            raise RelayUnavailable(f"cannot fetch from {self.url}: {reason}", relay=self.url,
                                   next_step=_unreachable(ssh), **ssh)
        return self._take_fetched()

    def fetch_if_moved(self) -> bool:
        """Fetch only when the relay's refs differ from the last fetch's: one ``git
        ls-remote`` (the relay's ref advertisement, nothing packed or sent) when
        nothing moved. True when it fetched."""
        with self.mirror.sync_lock:
            if self.mirror.relay_main() is not None and self._remote_refs() == self._fetched_refs():
                self.mirror.update_sync_state(last_fetch=time.time(), last_error=None)
                return False
            self._fetch()
            return True

    def _remote_refs(self) -> dict[str, str]:
        local = self._local_relay()
        if local is not None:
            # A relay on a local path: its refs read in place, no process started.
            found = local.refs(layout.USERS_REF_PREFIX)
            main = local.ref(layout.MAIN_REF)
            if main is not None:
                found[layout.MAIN_REF] = main
            return found
        code, out, err = self._git("ls-remote", "--quiet", self.url, layout.MAIN_REF,
                                   f"{layout.USERS_REF_PREFIX}*")
        if code != 0:
            reason, ssh = git_failure(err, self.url)
            self.mirror.update_sync_state(last_error=reason, last_error_at=time.time())
            raise RelayUnavailable(f"cannot reach {self.url}: {reason}", relay=self.url,
                                   next_step=_unreachable(ssh), **ssh)
        refs: dict[str, str] = {}
        for line in out.splitlines():
            oid, _, name = line.partition("\t")
            if name == layout.MAIN_REF or name.startswith(layout.USERS_REF_PREFIX):
                refs[name] = oid
        return refs

    def _copy_from_local_relay(self) -> bool:
        """For a relay on a local path that this copy fetched before: what ``git fetch``
        would bring, copied in process (the new objects read from the relay, the
        quarantine refs set and pruned), without starting git (about 36 ms of CPU a
        fetch). False when git should fetch instead: a first fetch (one pack is
        cheaper than objects one by one), or anything the relay's objects or refs
        make unreadable here (git then says why)."""
        relay = self._local_relay()
        if relay is None or self.mirror.relay_main() is None:
            return False
        store = self.mirror.store
        try:
            main = relay.ref(layout.MAIN_REF)
            if main is None:
                return False
            wanted = {FETCHED_USERS + name[len(layout.USERS_REF_PREFIX):]: oid
                      for name, oid in relay.refs(layout.USERS_REF_PREFIX).items()}
            wanted[FETCHED_MAIN] = main
            store.copy_objects(relay, wanted.values())
            for name, oid in wanted.items():
                if store.ref(name) != oid:
                    store.set_ref(name, oid, "gitrelay: fetch from a local relay")
            for name in store.refs(FETCHED_USERS):
                if name not in wanted:
                    store.delete_ref(name)
        except (pygit2.GitError, KeyError, ValueError, OSError):
            return False
        return True

    def _local_relay(self) -> Store | None:
        path = local_relay_dir(self.url) if self._relay_store is None else None
        if path is not None:
            try:
                self._relay_store = Store(path)
            except (OSError, ValueError, KeyError, pygit2.GitError):
                return None
        return self._relay_store

    def _fetched_refs(self) -> dict[str, str]:
        """The relay's refs as the last fetch left them (before verification)."""
        store = self.mirror.store
        refs = {layout.USERS_REF_PREFIX + name[len(FETCHED_USERS):]: oid
                for name, oid in store.refs(FETCHED_USERS).items()}
        main = store.ref(FETCHED_MAIN)
        if main is not None:
            refs[layout.MAIN_REF] = main
        return refs

    def take_fetched(self) -> SyncReport:
        """Verify and take what the last fetch left in the quarantine refs: for a process
        that ran that fetch with the git CLI alone (``git fetch`` with
        :data:`~gitrelay.core.layout.FETCH_REFSPECS`, under the sync lock)."""
        with self.mirror.sync_lock:
            return self._take_fetched()

    def _take_fetched(self) -> SyncReport:
        report = SyncReport()
        store = self.mirror.store
        fetched = store.ref(FETCHED_MAIN)
        if fetched is None:
            raise RelayUnavailable(_NO_MAIN.format(url=self.url), next_step=NextStep.NOT_A_RELAY,
                                   relay=self.url)
        old = self.mirror.relay_main()
        new, problem, valid = self._verify_main(old, fetched)
        report.verify_problem = problem
        if new == ZERO_OID:
            # Not even the root commit is valid: there is nothing to show or build on.
            self.mirror.update_sync_state(verify_problem=problem, last_error=problem,
                                          last_error_at=time.time())
            raise RelayUnavailable(f"{self.url} is not a valid gitrelay relay: {problem}",
                                   next_step=NextStep.VERIFY_RELAY, relay=self.url)
        if new != old:
            report.fetched = valid
            with self.mirror.refs_locked():
                local = self.mirror.main()
                if local is None:
                    store.set_ref(layout.MAIN_REF, new, "gitrelay: first fetch")
                elif not store.is_ancestor(new, local):
                    report.refused += self.mirror.rebase_outbox(old, new)
                store.set_ref(RELAY_MAIN, new, "gitrelay: fetch")
        self._take_user_refs(new)
        self.mirror.update_sync_state(last_fetch=time.time(), verify_problem=problem,
                                      last_error=None)
        return report

    def _verify_main(self, old: str | None, fetched: str) -> tuple[str, str | None, int]:
        """The newest fetched commit whose history is valid, the first problem, and how
        many fetched commits are valid."""
        mirror = self.mirror
        # Our own walk, not libgit2's: a commit libgit2 cannot parse (a hook-less relay
        # takes anything) is a verify problem like any other, never a crash.
        chain = first_parent_chain(mirror.objects, fetched, old)
        if not chain.reached:
            return old or ZERO_OID, (f"the relay's main ({fetched[:12]}) does not descend "
                                     f"from the last verified main ({(old or '')[:12]}): its "
                                     "history was rewritten; staying at the verified state"), 0
        commits = chain.commits
        if self.progress is not None and len(commits) >= PROGRESS_FROM:
            self.progress(f"checking {len(commits):,} operations from the relay against the "
                          "gate's rules…")
        objs = mirror.objects
        # A long run (a first fetch checks the whole history) is checked on
        # several processes at once; the answer is the same.
        invalid = first_invalid(mirror.path, objs, commits, objs.commit(old) if old else None)
        if invalid is not None:
            last = commits[invalid.index - 1].oid if invalid.index else old
            return last or ZERO_OID, (f"commit {commits[invalid.index].oid[:12]} breaks rule "
                                      f"{invalid.rule}: {invalid.message}; "
                                      f"{_kept_up_to(last)}"), invalid.index
        if chain.bad is not None:
            last = commits[-1].oid if commits else old
            problem = chain.problem
            rule = problem.data.get("rule", "objects") if isinstance(problem, RelayError) \
                else "objects"
            what = problem.message if isinstance(problem, RelayError) else str(problem)
            return last or ZERO_OID, (f"commit {chain.bad[:12]} breaks rule {rule}: {what}; "
                                      f"{_kept_up_to(last)}"), \
                len(commits)
        return (commits[-1].oid if commits else fetched), None, len(commits)

    def _take_user_refs(self, main_tip: str) -> None:
        store = self.mirror.store
        fetched = store.refs(FETCHED_USERS)
        tip_commit = self.mirror.objects.commit(main_tip)
        view = RelayView(self.mirror.objects, tip_commit.tree)
        main_seq = commit_seq(tip_commit)
        known = store.refs(RELAY_USERS)
        for name, oid in fetched.items():
            rel = name[len(FETCHED_USERS):]
            target = RELAY_USERS + rel
            owner = layout.inbox_ref_owner(layout.USERS_REF_PREFIX + rel)
            if owner is None or known.get(target) == oid:
                continue
            old = known.get(target)
            try:
                if old is not None and not store.is_ancestor(old, oid):
                    continue
                for commit in self.mirror.commits_between(old, oid):
                    check_inbox_commit(self.mirror.objects, commit, owner, main_seq, view,
                                       verify_signature=signature_checker())
            except (RelayError, ValueError, KeyError):
                continue
            store.set_ref(target, oid, "gitrelay: fetch")
        mine = layout.inbox_ref(self.mirror.handle)
        remote = store.ref(RELAY_USERS + self.mirror.handle + "/" + layout.INBOX_REF_LEAF)
        local = store.ref(mine)
        if remote is not None and local != remote and (
                local is None or not store.is_ancestor(remote, local)):
            with self.mirror.refs_locked():
                merged = self.inbox_merger(self.mirror, store.ref(mine), remote)
                if merged is not None:
                    store.set_ref(mine, merged, "gitrelay: merge inbox state")

    # --- push -------------------------------------------------------------------

    def deliver(self, *, max_attempts: int = MAX_ATTEMPTS, deadline: float | None = None
                ) -> SyncReport:
        """Push everything queued until the outbox is empty.

        The first push is optimistic (no fetch before it: when nobody else
        wrote, one push is all it costs); when the relay moved, git refuses it
        on the client side without sending anything, and we fetch, replay and
        retry — at once the first time, then with backoff and jitter.
        """
        with self.mirror.sync_lock:
            report = SyncReport()
            if self.mirror.relay_main() is None:
                report = self._fetch()
            for attempt in range(1, max_attempts + 1):
                report.attempts = attempt
                pushed = self._push_once(report)
                if pushed:
                    return report
                if deadline is not None and time.monotonic() > deadline:
                    return report
                if attempt > 1:
                    time.sleep(min(0.25, 0.004 * 2 ** min(attempt, 8))
                               * random.uniform(0.5, 1.5))
                fetched = self._fetch()
                report.refused += fetched.refused
                report.fetched += fetched.fetched
                if fetched.verify_problem:
                    # Our copy stops at the last valid commit, so the relay's main
                    # can never be a fast-forward of it: retrying cannot help.
                    raise RelayUnavailable(
                        f"the relay holds an invalid commit: {fetched.verify_problem}",
                        next_step=NextStep.VERIFY_RELAY, relay=self.url, queued=True)
            raise RelayUnavailable(f"could not deliver to {self.url} after {max_attempts} "
                                   "attempts (too many concurrent writers?)",
                                   next_step=NextStep.SYNC_AGAIN, queued=True)

    def _drop_inbox_state(self, remote: str | None, commit: str | None,
                          error: RelayError) -> Refused:
        """The gate refused our inbox ref: go back to the relay's copy, and say so."""
        mirror, store = self.mirror, self.mirror.store
        mine = layout.inbox_ref(mirror.handle)
        with mirror.refs_locked():
            state = store.ref(mine)
            if remote is not None:
                store.set_ref(mine, remote, "gitrelay: inbox state refused")
            else:
                store.delete_ref(mine)
        return mirror.record(_inbox_refusal(mirror.handle, state, commit, error))

    def _crash_during(self, push: tuple[str, ...]) -> None:
        """Crash tests: start the push, then die while it is in flight."""
        import subprocess

        subprocess.Popen(["git", "--git-dir", str(self.mirror.path), *push], env=self.env,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.01)
        faults.point("during_push")

    def _push_once(self, report: SyncReport) -> bool:
        mirror, store = self.mirror, self.mirror.store
        mirror.flush()  # git pushes the ref and the object store, not the journal
        local = store.ref(layout.MAIN_REF)
        relay = mirror.relay_main()
        mine = layout.inbox_ref(mirror.handle)
        local_inbox = store.ref(mine)
        remote_inbox = store.ref(RELAY_USERS + mirror.handle + "/" + layout.INBOX_REF_LEAF)
        updates = []
        if local is not None and local != relay:
            updates.append((relay or ZERO_OID, local, layout.MAIN_REF))
        if local_inbox is not None and local_inbox != remote_inbox:
            updates.append((remote_inbox or ZERO_OID, local_inbox, mine))
        if not updates:
            return True
        queued = len(mirror.commits_between(relay, local)) if local else 0
        here = self._local_relay()
        if here is not None and localrelay.checks_here(here):
            # The relay's gate is this gitrelay's: checked and written here, no git.
            pushed = localrelay.push(here, store, updates, self.env, main=relay)
            refusals = [(r.ref, r.commit, r.rule, r.message) for r in pushed.refusals]
            if pushed.done:
                self._pushed(report, local, relay, local_inbox, queued)
                return mirror.main() == local and store.ref(mine) == local_inbox
            if refusals:
                self._refused(report, refusals, remote_inbox)
            return False
        push = ("push", "--atomic", "--porcelain", "--quiet", self.url,
                *(f"{ref}:{ref}" for _, _, ref in updates))
        if faults.armed("during_push"):
            self._crash_during(push)
        code, out, err = self._git(*push)
        if code == 0:
            self._pushed(report, local, relay, local_inbox, queued)
            return mirror.main() == local and store.ref(mine) == local_inbox
        found = [m for m in (_REFUSAL_RE.search(line) for line in err.splitlines()) if m]
        if found:
            self._refused(report, [(ref, commit or "", rule, message.strip())
                                   for ref, commit, rule, message in (m.groups() for m in found)],
                          remote_inbox)
            return False
        if "[rejected]" in out or "non-fast-forward" in out or "fetch first" in out:
            return False
        if "[remote rejected]" in out:
            if "hook declined" in out:
                raise GateRefused(f"{self.url} refused the push: {_last_line(err or out)} "
                                  "(its hook is not a gitrelay gate, or it failed)",
                                  next_step=NextStep.ASK_ADMIN, rule="gate", relay=self.url)
            # Another push moved the ref between our hook run and our ref update
            # ("failed to update ref", "cannot lock ref"): the same as non-fast-forward.
            return False
        reason, ssh = git_failure(err or out, self.url)
        mirror.update_sync_state(last_error=reason, last_error_at=time.time())
        raise RelayUnavailable(f"cannot push to {self.url}: {reason}", relay=self.url,
                               next_step=NextStep.FIX_SSH if ssh else NextStep.SYNC_AGAIN,
                               queued=True, **ssh)

    def _pushed(self, report: SyncReport, local: str | None, relay: str | None,
                local_inbox: str | None, queued: int) -> None:
        """The relay took the push: record it as a fetch would have found it."""
        mirror, store = self.mirror, self.mirror.store
        faults.point("after_push")
        # The relay now holds what we pushed, as a fetch would have found it: the
        # next look (fetch_if_moved) sees no change of ours.
        if local is not None and local != relay:
            store.set_ref(RELAY_MAIN, local, "gitrelay: delivered")
            store.set_ref(FETCHED_MAIN, local, "gitrelay: delivered")
        if local_inbox is not None:
            leaf = mirror.handle + "/" + layout.INBOX_REF_LEAF
            store.set_ref(RELAY_USERS + leaf, local_inbox, "gitrelay: delivered")
            store.set_ref(FETCHED_USERS + leaf, local_inbox, "gitrelay: delivered")
        report.delivered += queued
        # The relay took a fast-forward of our verified main: it is valid again.
        mirror.update_sync_state(last_push=time.time(), last_error=None, verify_problem=None)

    def _refused(self, report: SyncReport, refusals: list[tuple[str, str, str, str]],
                 remote_inbox: str | None) -> None:
        """The gate refused the push: ``(ref, commit, rule, message)`` each. A refused
        operation leaves the outbox (the rest is replayed); refused inbox state goes
        back to the relay's copy."""
        mine = layout.inbox_ref(self.mirror.handle)
        for ref, commit, rule, message in refusals:
            error = error_for_rule(rule, message)
            if ref == mine:
                report.refused.append(self._drop_inbox_state(remote_inbox, commit or None,
                                                              error))
                continue
            dropped = self.mirror.drop_from_outbox(commit, _as_gate_error(error))
            if dropped is not None:
                report.refused.append(dropped)


def _kept_up_to(last: str | None) -> str:
    """What this client keeps of a relay whose history breaks a rule at some commit."""
    if not last or last == ZERO_OID:
        return "so not one of its commits can be used"
    return f"this client stops at {last[:12]}"


def probe(url: str, env: dict[str, str] | None = None) -> None:
    """Raise RelayUnavailable unless ``url`` answers as a relay (it has a main branch).

    Run before a first fetch creates the local mirror, so that a mistyped or
    unreachable URL leaves nothing behind in ``$GITRELAY_HOME``.
    """
    proc = run_git(["ls-remote", "--heads", url, layout.MAIN_REF],
                   env=relay_ssh_env(url, hermetic_env(env), config.home()), timeout=60.0)
    if proc.returncode != 0:
        reason, ssh = git_failure(proc.stderr, url)
        ssh = _without_a_key(ssh, env)
        raise RelayUnavailable(f"cannot fetch from {url}: {reason}", relay=url,
                               next_step=_unreachable(ssh), **ssh)
    if not proc.stdout.strip():
        raise RelayUnavailable(_NO_MAIN.format(url=url), next_step=NextStep.NOT_A_RELAY,
                               relay=url)


_NO_MAIN = ("{url} is not a relay yet: it has no main branch (an empty repository, or "
            "one that is not a gitrelay relay)")


def _no_main(reason: str) -> bool:
    """Whether git's reason for a failed fetch is that the remote has no main branch."""
    return "couldn't find remote ref" in reason and layout.MAIN_REF in reason


# The keys ssh offers without being told (ssh(1), IdentityFile's defaults).
_DEFAULT_KEYS = ("id_rsa", "id_ecdsa", "id_ecdsa_sk", "id_ed25519", "id_ed25519_sk", "id_dsa")


def _without_a_key(ssh: dict[str, str], env: Mapping[str, str] | None) -> dict[str, str]:
    """``ssh`` (from :func:`git_failure`) with a refused key told apart from having none:
    when the server refused the key and this user has no key ssh would offer (none of
    ssh's default key files, no ``IdentityFile`` in ~/.ssh/config, no key in ssh-agent,
    no ``-i`` in GIT_SSH_COMMAND), the problem is ``no_key``."""
    if ssh.get("ssh_problem") != "key_refused":
        return ssh
    merged = {**os.environ, **(env or {})}
    if " -i" in merged.get("GIT_SSH_COMMAND", "") + merged.get("GIT_SSH", ""):
        return ssh
    # ssh reads the account's home, which $HOME may not be; look in both.
    homes = {Path(merged.get("HOME") or Path.home()),
             Path(os.path.expanduser(f"~{getpass.getuser()}"))}
    for dot_ssh in (home / ".ssh" for home in homes):
        if any((dot_ssh / name).is_file() for name in _DEFAULT_KEYS):
            return ssh
        try:
            config = (dot_ssh / "config").read_text(encoding="utf-8", errors="replace")
        except OSError:
            config = ""
        if "identityfile" in config.casefold():
            return ssh
    if merged.get("SSH_AUTH_SOCK"):
        try:
            listed = subprocess.run(["ssh-add", "-l"], capture_output=True, timeout=10,
                                    check=False, env=merged)
        except (OSError, subprocess.TimeoutExpired):
            return ssh
        if listed.returncode != 1:  # 0: keys loaded; 2: no agent to ask (cannot tell)
            return ssh
    return {**ssh, "ssh_problem": "no_key"}


def _inbox_refusal(handle: str, state: str | None, commit: str | None,
                   error: RelayError) -> Refused:
    rule = str(error.data.get("rule", error.name))
    return Refused(f"inbox:{state or commit or ''}", "inbox", None, handle, rule, error.name,
                   error.code, f"your inbox state (acknowledgements and claims) at "
                   f"{(commit or (state or '')[:12]) or 'its tip'} was refused: {error.message}; "
                   "it was reset to the relay's copy", now_iso(), {"commit": state or ""})


def _as_gate_error(error: RelayError) -> RelayError:
    if isinstance(error, GateRefused) or type(error) is not RelayError:
        return error
    return GateRefused(error.message, rule=error.data.get("rule", "gate"))


def _last_line(text: str) -> str:
    """git's reason: its first ``fatal:``/``error:`` line (what follows is advice such as
    "...and the repository exists."), else the last line."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for line in lines:
        for prefix in ("fatal: ", "error: "):
            if line.startswith(prefix):
                return line[len(prefix):]
    return lines[-1] if lines else "unknown error"


def _unreachable(ssh: dict[str, str]) -> NextStep:
    """What to do when the relay cannot be read: fix ssh when it failed (``ssh``, from
    :func:`git_failure`), else check the URL and the access to it."""
    return NextStep.FIX_SSH if ssh else NextStep.CHECK_RELAY_URL
