"""The rules of a push as a whole: which refs it may move, and every new commit on them.

:func:`check_updates` takes the ``<old> <new> <ref>`` updates of one push and returns
its refusals. The relay's pre-receive gate (:mod:`gitrelay.gate.gate`) runs it on what
git received; a write to a relay on a local path whose gate is this very gitrelay runs
it in process before moving the relay's refs (:mod:`gitrelay.sync.localrelay`). Standard
library only, like every module the gate imports.
"""

from __future__ import annotations

from gitrelay.core import layout
from gitrelay.core.commits import commit_seq
from gitrelay.core.errors import REFUSAL_PREFIX, RelayError, error_for_rule
from gitrelay.core.identity import check_registrations_per_push, find_pusher
from gitrelay.core.objects import ZERO_OID, Commit, Objects
from gitrelay.core.rules import check_commit, check_inbox_commit
from gitrelay.core.schema import DEFAULT_LIMITS
from gitrelay.core.view import RelayView

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping

    from gitrelay.core.identity import SignatureCheck

MAX_WALK = 1_000_000


class Refusal:
    def __init__(self, ref: str, commit: str, rule: str, message: str) -> None:
        self.ref = ref
        self.commit = commit
        self.rule = rule
        self.message = message

    def line(self) -> str:
        at = f" at {self.commit[:12]}" if self.commit else ""
        return f"{REFUSAL_PREFIX} {self.ref}{at}: [{self.rule}] {self.message}"


def new_commits(objs: Objects, old: str, new: str) -> list[Commit]:
    """Commits from ``old`` (exclusive) to ``new``, oldest first, by first parents.

    Raises a linear-history refusal when ``new`` does not descend from ``old``.
    """
    chain: list[Commit] = []
    oid = new
    while oid != old:
        if len(chain) >= MAX_WALK:
            raise RelayError("push is too long to check", rule="linear-history")
        commit = objs.commit(oid)
        chain.append(commit)
        if not commit.parents:
            if old != ZERO_OID:
                raise _linear(new, old)
            break
        oid = commit.parents[0]
    chain.reverse()
    return chain


def _linear(new: str, old: str) -> RelayError:
    return error_for_rule("linear-history", f"{new[:12]} does not descend from {old[:12]}: "
                          "history is never rewritten (fetch, rebase your operations, push)")


def check_updates(objs: Objects, updates: list[tuple[str, str, str]],
                  environ: Mapping[str, str],
                  verify_signature: SignatureCheck | None = None) -> list[Refusal]:
    """Check a push: every ref update and every new commit. Returns the refusals."""
    refusals: list[Refusal] = []
    main_tip = next((new for _, new, ref in updates if ref == layout.MAIN_REF), None)
    # main first: the inbox refs are checked against main as it will be after the push.
    ordered = sorted(updates, key=lambda u: u[2] != layout.MAIN_REF)
    for old, new, ref in ordered:
        try:
            if new == ZERO_OID:
                raise RelayError(f"deleting {ref} is not allowed", rule="linear-history")
            if ref == layout.MAIN_REF:
                _check_main(objs, old, new, ref, environ, verify_signature)
                continue
            owner = layout.inbox_ref_owner(ref)
            if owner is None:
                raise RelayError(f"{ref} is outside the relay's ref namespaces "
                                 f"({layout.MAIN_REF}, {layout.USERS_REF_PREFIX}<handle>/"
                                 f"{layout.INBOX_REF_LEAF})", rule="ref-namespace")
            tip = main_tip or _current_main(objs)
            if tip is None:
                raise RelayError("the relay has no main yet", rule="ref-namespace")
            tip_commit = objs.commit(tip)
            view = RelayView(objs, tip_commit.tree)
            pusher = find_pusher(view.config, environ)
            _skip_blobs_over_limit(objs, view)
            for commit in new_commits(objs, old, new):
                check_inbox_commit(objs, commit, owner, commit_seq(tip_commit), view,
                                   pusher=pusher, verify_signature=verify_signature)
        except RelayError as exc:
            refusals.append(Refusal(ref, str(exc.data.get("commit", "")),
                                    str(exc.data.get("rule", exc.name)), exc.message))
        except (KeyError, ValueError, RecursionError) as exc:
            # Fail closed with a rule, never a traceback.
            refusals.append(Refusal(ref, new, "objects", f"unreadable object: {exc}"))
    return refusals


def _current_main(objs: Objects) -> str | None:
    resolve = getattr(objs.source, "resolve", None)
    return resolve(layout.MAIN_REF) if resolve is not None else None


def _check_main(objs: Objects, old: str, new: str, ref: str, environ: Mapping[str, str],
                verify_signature: SignatureCheck | None) -> None:
    pusher = None
    parent = objs.commit(old) if old != ZERO_OID else None
    commits = new_commits(objs, old, new)
    for i, commit in enumerate(commits):
        if parent is not None and pusher is None:
            view = RelayView(objs, parent.tree)
            pusher = find_pusher(view.config, environ)
            # Every later commit is checked against this same config: a commit
            # that changes relay.json is refused before the next one is read.
            _skip_blobs_over_limit(objs, view)
            check_registrations_per_push(commits[i:], view.limits)
        check_commit(objs, commit, parent, pusher=pusher, verify_signature=verify_signature)
        parent = commit


def _skip_blobs_over_limit(objs: Objects, view: RelayView) -> None:
    """Leave unread any blob over both size limits the rules can apply to it.

    Files are checked against ``view``'s limits, and a root commit's relay.json
    against the default ones; a blob over both is refused by the size rule
    from its length alone (:class:`~gitrelay.core.objects.UnreadBlob`).
    """
    objs.max_blob = max(view.limits["max_file_bytes"], DEFAULT_LIMITS["max_file_bytes"])
