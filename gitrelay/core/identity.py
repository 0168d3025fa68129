"""Who may write: the pusher the server names, signatures, and registration.

Standard library only: the gate imports this module.
"""

from __future__ import annotations

from gitrelay.core import layout
from gitrelay.core.errors import error_for_rule as refuse
from gitrelay.core.vocab import limit

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from typing import Any

    from gitrelay.core.objects import Commit
    from gitrelay.core.view import RelayView

class Pusher:
    """Who the server says pushed: the env variable and the username in it.

    ``username == ""`` is a push the gate checked that no server vouched for.
    The rules get ``pusher=None`` only away from the gate (the client's own
    check, verify-on-read), where nobody can know who will push or who pushed.
    """

    def __init__(self, env: str, username: str) -> None:
        self.env = env
        self.username = username


def find_pusher(config: Mapping[str, Any], environ: Mapping[str, str]) -> Pusher:
    """The pusher named by the first variable of ``pusher_env`` that is set; at the gate."""
    for name in config.get("pusher_env", []):
        value = environ.get(name, "").strip()
        if value:
            return Pusher(name, value)
    return Pusher("", "")


if TYPE_CHECKING:
    SignatureCheck = Callable[[Commit, str, list[str]], str | None]


def check_identity(view: RelayView, commit: Commit, actor: str, pusher: Pusher | None,
                   *, registering: dict[str, Any] | None = None,
                   verify_signature: SignatureCheck | None = None) -> None:
    """The pusher and signature rules for an operation by ``actor``."""
    config = view.config
    profile = registering if registering is not None else view.profile(actor)
    if profile is None:
        raise refuse("recipient_not_found", f"commit {commit.oid[:12]}: actor {actor} is not a "
                     "registered teammate", commit=commit.oid, field="actor")
    if pusher is None:
        pass  # not at the gate: the pusher is unknown here
    elif not pusher.username:
        if config.get("require_pusher"):
            raise refuse("pusher", f"commit {commit.oid[:12]}: this relay requires an "
                         "authenticated pusher and the server supplied none "
                         f"(looked in {', '.join(config['pusher_env']) or 'no variables'})",
                         commit=commit.oid)
    elif pusher.username not in profile.get("usernames", []):
        raise refuse("pusher", f"commit {commit.oid[:12]}: actor {actor} is not the "
                     f"authenticated pusher {pusher.username!r} ({pusher.env}); "
                     f"{actor}'s server usernames are {profile.get('usernames', [])}",
                     commit=commit.oid, field="actor")
    elif registering is not None:
        others = [u for u in registering.get("usernames", []) if u != pusher.username]
        if others:
            raise refuse("registration", f"commit {commit.oid[:12]}: {actor}'s profile "
                         f"claims the server username {others[0]!r}, but the pusher is "
                         f"{pusher.username!r} ({pusher.env}); a registration claims only "
                         "the pusher's own username", commit=commit.oid, field="usernames")
    if config.get("require_signatures"):
        keys = list(profile.get("signing_keys", []))
        problem = "commit is not signed" if commit.signature is None else None
        if problem is None:
            check = verify_signature
            if check is None:
                # Imported here, not at the top: only relays that require signatures
                # pay for it, and the gate's start-up stays small.
                from gitrelay.core.signing import verify_commit_signature

                check = verify_commit_signature
            if not keys:
                problem = f"{actor} has no registered signing key"
            else:
                problem = check(commit, actor, keys)
        if problem:
            raise refuse("signature", f"commit {commit.oid[:12]}: {problem}; this relay "
                         "requires every operation to be signed by its actor's registered key",
                         commit=commit.oid)



def check_registration(view: RelayView, commit: Commit, doc: Mapping[str, Any],
                       handle: str) -> None:
    short = commit.oid[:12]
    if doc["handle"] != handle:
        raise refuse("layout", f"commit {short}: profile of {doc['handle']} stored under "
                     f"{layout.teammate_dir(handle, view.sharded)}", commit=commit.oid,
                     field="handle")
    existing = view.profile(handle)
    if existing is not None:
        raise refuse("registration", f"commit {short}: {existing['handle']} is already "
                     "registered (handles are unique, ignoring case); a profile is never "
                     "replaced", commit=commit.oid, field="handle")
    for username in doc.get("usernames", []):
        owner = view.username_owner(username)
        if owner is not None:
            raise refuse("registration", f"commit {short}: server username {username!r} "
                         f"already belongs to {owner}", commit=commit.oid,
                         field="usernames")


def check_registrations_per_push(commits: Sequence[Commit], limits: Mapping[str, int]) -> None:
    """At the gate, before any commit is checked: at most ``max_registrations_per_push``
    registrations in one push to main (counted by their ``Gitrelay-Op`` trailer, which
    the rules then hold to the file each adds).

    Each registration is checked against the registry as its parent left it, so a push
    of thousands would hold the gate for seconds: it is refused at once, naming the
    first registration over the limit. Pushed in batches, the same history passes.
    """
    most = limit(limits, "max_registrations_per_push")
    count = 0
    for commit in commits:
        if commit.trailers.get(layout.TRAILER_OP) == layout.OP_REGISTER:
            count += 1
            if count > most:
                raise refuse("size", f"commit {commit.oid[:12]} is registration {count:,} of "
                             f"this push, over the limit of {most:,} registrations per push "
                             "(limits.max_registrations_per_push in relay.json); push them "
                             f"in batches of at most {most:,}", commit=commit.oid,
                             field="limits.max_registrations_per_push")


def check_profile_update(view: RelayView, commit: Commit, doc: Mapping[str, Any], handle: str,
                         number: int | None, pusher: Pusher | None, *,
                         verify_signature: SignatureCheck | None = None) -> None:
    """A teammate's correction of their own profile (``update-N.json`` in their directory).

    Only they may write it: the pusher and signature rules hold as for any of their
    operations. A server username it adds is proved as at registration: where the
    server names the pusher, it is the pusher's own, and since that account is not yet
    in the profile, the commit's signature by a registered key is what shows it is
    them (so only a relay that requires signatures takes it in band).
    """
    short = commit.oid[:12]
    current = view.profile(handle)
    if current is None:
        raise refuse("recipient_not_found", f"commit {short}: {handle} is not a registered "
                     "teammate; only a registered teammate corrects their profile",
                     commit=commit.oid, field="handle")
    if doc["handle"] != handle or current["handle"] != handle:
        raise refuse("layout", f"commit {short}: a profile update of {doc['handle']} stored "
                     f"under {layout.teammate_dir(handle, view.sharded)}, where "
                     f"{current['handle']} is registered; a "
                     "handle never changes", commit=commit.oid, field="handle")
    expected = view.profile_updates(handle) + 1
    if number != expected:
        raise refuse("sequence", f"commit {short}: profile update {number} of {handle}, "
                     f"expected {expected}", commit=commit.oid, field="update")
    known = current.get("usernames", [])
    added = [u for u in doc["usernames"] if u not in known]
    for username in added:
        owner = view.username_owner(username)
        if owner is not None:
            raise refuse("registration", f"commit {short}: server username {username!r} "
                         f"already belongs to {owner}", commit=commit.oid,
                         field="usernames")
    if pusher is None or not pusher.username or pusher.username in known:
        check_identity(view, commit, handle, pusher, verify_signature=verify_signature)
        if pusher is not None and pusher.username and added:
            raise refuse("registration", f"commit {short}: {handle}'s profile update claims "
                         f"the server username {added[0]!r}, but the pusher is "
                         f"{pusher.username!r} ({pusher.env}); a server username is added "
                         "only by a push from that account", commit=commit.oid,
                         field="usernames")
        return
    # Pushed from an account the profile does not list yet.
    if added != [pusher.username]:
        check_identity(view, commit, handle, pusher, verify_signature=verify_signature)
    if not view.config.get("require_signatures"):
        raise refuse("pusher", f"commit {short}: actor {handle} is not the authenticated "
                     f"pusher {pusher.username!r} ({pusher.env}); a profile update adding "
                     "the pusher's server username must be signed by the teammate's "
                     "registered key, and this relay does not require signatures: nothing in "
                     "this push shows the account is theirs", commit=commit.oid, field="actor")
    check_identity(view, commit, handle, None, verify_signature=verify_signature)
