"""The relay's read model: its state at one tree, as the rules read it.

Standard library only: the gate imports this module.
"""

from __future__ import annotations

from gitrelay.core import layout, schema
from gitrelay.core.errors import error_for_rule as refuse
from gitrelay.core.ids import check_thread_id, handle_key, read_thread_ref, resolve_prefix
from gitrelay.core.objects import Objects, TreeEntry, remember
from gitrelay.core.threadstate import ThreadState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

# Parsed ``relay.json`` and profile sets, keyed by the ids of the objects they were
# read from: an object id names its content, so a parse is good for any view of
# any repository. Every operation is checked against the team's twelve-odd
# profiles; without this each check would parse them all again.
_CONFIGS: dict[str, dict[str, Any]] = {}
_PROFILE_SETS: dict[tuple[str, str], dict[str, dict[str, Any]]] = {}
# Every server username a profile set claims, to the handle claiming it (same keys).
_USERNAMES: dict[tuple[str, str], _Names] = {}
_PROFILES: dict[tuple[str, str, str], dict[str, Any] | None] = {}
# Per directory of a sharded registry, by its tree id (and relay.json's, for the
# profiles): a new version of the registry reads only the shards that changed.
# Bounded apart from the parse caches above: a registry has thousands of them.
_SHARD_DIRS: dict[tuple[str, str], list[TreeEntry]] = {}  # by (level, tree id)
_DIR_PROFILES: dict[tuple[str, str], dict[str, Any] | None] = {}
_SHARD_CACHE_MAX = 1 << 16


def _keep(cache: dict[Any, Any], key: Any, value: Any) -> None:
    if len(cache) >= _SHARD_CACHE_MAX:
        cache.clear()
    cache[key] = value


class _Names:
    """Every server username a registry claims, to the handle claiming it: a mapping
    shared by a run of registrations, plus those the run added since (copied at each
    registration, so a few), folded in once they are many. A push of n registrations
    costs about n * n / 512 copies, not n * n / 2."""

    __slots__ = ("added", "base")
    FOLD_AT = 256

    def __init__(self, base: dict[str, str], added: dict[str, str]) -> None:
        self.base = base
        self.added = added

    def get(self, username: str) -> str | None:
        return self.added.get(username) or self.base.get(username)

    def plus(self, handle: str, usernames: list[str]) -> _Names:
        added = {**self.added, **dict.fromkeys(usernames, handle)}
        if len(added) >= self.FOLD_AT:
            return _Names({**self.base, **added}, {})
        return _Names(self.base, added)


class RelayView:
    """Read access to the relay's state at one tree, with small caches.

    ``config`` and ``profiles()`` are shared between views of trees holding the
    same ``relay.json`` blob and ``teammates`` tree; treat them as read-only.

    The teammates' directories lie where relay.json's ``teammates_layout`` says:
    ``teammates/<handle>/`` (``flat``, or the field left out) or
    ``teammates/<c0>/<c1>/<handle>/`` (``sharded``), docs/format.md.
    """

    def __init__(self, objs: Objects, tree: str) -> None:
        self.objs = objs
        self.tree = tree
        self._config: dict[str, Any] | None = None
        self._config_oid = ""
        self._profiles: dict[str, dict[str, Any]] | None = None

    @property
    def config(self) -> dict[str, Any]:
        if self._config is None:
            entry = self.objs.entry(self.tree, layout.CONFIG_PATH)
            if entry is None or entry.is_tree:
                raise refuse("layout", f"the relay has no {layout.CONFIG_PATH}")
            cached = _CONFIGS.get(entry.oid)
            if cached is None:
                cached = schema.load("config", self.objs.blob(entry.oid))
                remember(_CONFIGS, entry.oid, cached)
            self._config, self._config_oid = cached, entry.oid
        return self._config

    @property
    def limits(self) -> Mapping[str, int]:
        limits: Mapping[str, int] = self.config["limits"]
        return limits

    @property
    def sharded(self) -> bool:
        """Whether this relay keeps its teammates' directories in shards."""
        return self.config.get("teammates_layout") == layout.TEAMMATES_SHARDED

    def _teammates(self) -> tuple[str, str] | None:
        """The ``teammates`` tree's id and the ``relay.json`` blob's (whose limits the
        profiles are read with), or None when the relay has no teammates yet."""
        _ = self.config  # read first: it sets _config_oid
        entry = self.objs.entry(self.tree, layout.TEAMMATES_DIR)
        if entry is None or not entry.is_tree:
            return None
        return entry.oid, self._config_oid

    def _dirs(self, teammates: str) -> list[TreeEntry]:
        """Every teammate's directory in the ``teammates`` tree ``teammates``, each
        named by its handle, in the order of the names: its own entries (flat), or
        those of its shards, each shard's read once for all the versions of the
        registry that hold it."""
        if not self.sharded:
            return [e for e in self.objs.tree(teammates) if e.is_tree]
        found = _SHARD_DIRS.get(("teammates", teammates))
        if found is None:
            found = []
            for c0 in self.objs.tree(teammates):
                if c0.is_tree:
                    found += self._shard_dirs(c0.oid)
            found.sort(key=lambda e: e.name)  # by handle, as a flat directory lists them
            _keep(_SHARD_DIRS, ("teammates", teammates), found)
        return found

    def _shard_dirs(self, c0: str) -> list[TreeEntry]:
        found = _SHARD_DIRS.get(("h0", c0))
        if found is None:
            found = [e for c1 in self.objs.tree(c0) if c1.is_tree
                     for e in self.objs.tree(c1.oid) if e.is_tree]
            _keep(_SHARD_DIRS, ("h0", c0), found)
        return found

    def _dir_profile(self, directory: str) -> dict[str, Any] | None:
        """The profile in a teammate's directory (a tree id), read once per version."""
        key = (directory, self._config_oid)
        if key in _DIR_PROFILES:
            return _DIR_PROFILES[key]
        found = self._profile_in(directory)
        _keep(_DIR_PROFILES, key, found)
        return found

    def profiles(self) -> dict[str, dict[str, Any]]:
        """Every registered teammate, keyed by casefolded handle."""
        if self._profiles is None:
            key = self._teammates()
            if key is None:
                self._profiles = {}
                return self._profiles
            cached = _PROFILE_SETS.get(key)
            if cached is None:
                cached = {}
                read = self._dir_profile if self.sharded else self._profile_in
                for e in self._dirs(key[0]):
                    # From the entry itself: a lookup by path would scan the directory
                    # for each teammate again.
                    found = read(e.oid)
                    if found is not None:
                        cached[e.name.casefold()] = found
                remember(_PROFILE_SETS, key, cached)
            self._profiles = cached
        return self._profiles

    def handles(self) -> list[str]:
        """Every registered handle, sorted, from the teammates' directories' names
        alone (each is its profile's handle: the gate holds them equal)."""
        key = self._teammates()
        if key is None:
            return []
        return sorted(e.name for e in self._dirs(key[0]))

    def profiles_named(self, names: list[str]) -> list[dict[str, Any]]:
        """The profiles in these teammates' directories (names as :meth:`handles`
        gives them), in their order: a page reads its own profiles only, in one pass
        over the directory, unless every profile is at hand already."""
        key = self._teammates()
        if key is None:
            return []
        whole = _PROFILE_SETS.get(key)
        if whole is not None:
            return [whole[n.casefold()] for n in names if n.casefold() in whole]
        if self.sharded:
            out = []
            for name in names:
                entry = self._own_dir(name)
                profile = self._dir_profile(entry.oid) if entry is not None else None
                if profile is not None:
                    out.append(profile)
            return out
        wanted = set(names)
        found = {e.name: e for e in self.objs.tree(key[0]) if e.is_tree and e.name in wanted}
        out = []
        for name in names:
            entry = found.get(name)
            profile = self._profile_in(entry.oid) if entry else None
            if profile is not None:
                out.append(profile)
        return out

    def _own_dir(self, handle: str) -> TreeEntry | None:
        """On a sharded relay: the directory of ``handle`` (ignoring case) in its shard,
        the last of equal names as in profiles(), read from that shard alone."""
        shard = self.objs.entry(self.tree, layout.teammate_shard(handle))
        if shard is None or not shard.is_tree:
            return None
        folded = handle_key(handle)
        found = None
        for e in self.objs.tree(shard.oid):
            if e.is_tree and handle_key(e.name) == folded:
                found = e
        return found

    def username_owner(self, username: str) -> str | None:
        """The handle of the registered profile claiming a server username, or None."""
        return self._names().get(username)

    def _names(self) -> _Names:
        key = self._teammates()
        if key is None:
            return _Names({}, {})
        cached = _USERNAMES.get(key)
        if cached is None:
            cached = _Names({str(u): str(p["handle"]) for p in self.profiles().values()
                             for u in p.get("usernames", [])}, {})
            remember(_USERNAMES, key, cached)
        return cached

    def registered(self, tree: str, doc: Mapping[str, Any]) -> None:
        """Remember the registry of ``tree``: this view's plus the profile ``doc``, which a
        commit from this view's tree to ``tree`` adds (checked by the rules just now).

        The next operation is checked against ``tree``, and registrations come in
        runs: without this, each of them would read the whole registry again, and a
        push of n registrations would read n * n / 2 profiles.
        """
        key = self._teammates()
        after = RelayView(self.objs, tree)._teammates()
        if after is None:
            return
        handle = str(doc["handle"])
        # Read here if no check read them (a profile without usernames): the next
        # registration then finds them at hand, whatever this one claimed.
        names = self._names()
        remember(_USERNAMES, after, names.plus(handle, [str(u) for u in doc["usernames"]]))
        if self.sharded:
            return  # a lookup of one teammate reads their shard alone
        profiles = _PROFILE_SETS.get(key) if key is not None else {}
        if profiles is not None:
            remember(_PROFILE_SETS, after, {**profiles, handle.casefold(): dict(doc)})

    def profile(self, handle: str) -> dict[str, Any] | None:
        """One teammate's profile (handles compare ignoring case), or None.

        Reads that teammate's file alone unless every profile is at hand: the
        gate runs once per push in a new process, where reading the whole
        team's profiles for the one or two an operation names was most of its
        object reads. On a sharded relay, that is the teammate's shard alone.
        """
        if self._profiles is not None:
            return self._profiles.get(handle.casefold())
        key = self._teammates()
        if key is None:
            return None
        folded = handle_key(handle)
        whole = _PROFILE_SETS.get(key)
        if whole is not None:
            self._profiles = whole
            return whole.get(folded)
        if self.sharded:
            entry = self._own_dir(handle)
            return self._dir_profile(entry.oid) if entry is not None else None
        one = (*key, folded)
        if one in _PROFILES:
            return _PROFILES[one]
        found = None
        for e in self.objs.tree(key[0]):
            if handle_key(e.name) == folded:  # the last of equal names, as in profiles()
                found = self._read_profile(e.name) or found
        remember(_PROFILES, one, found)
        return found

    def _read_profile(self, name: str, as_of: str | None = None) -> dict[str, Any] | None:
        """The profile in ``name``'s directory, as its newest update corrected it
        (or the newest made at ``as_of`` or before, a relay time)."""
        entry = self.objs.entry(self.tree, layout.teammate_dir(name, self.sharded))
        if entry is None or not entry.is_tree:
            return None
        return self._profile_in(entry.oid, as_of)

    def _profile_in(self, directory: str, as_of: str | None = None) -> dict[str, Any] | None:
        """The profile in a teammate's directory (a tree id), corrected by its newest
        update (made at ``as_of`` or before, when given)."""
        found = self._teammate_files(directory)
        if found is None:
            return None
        profile, updates = found
        doc = schema.load("profile", self.objs.blob(profile.oid), self.limits)
        for entry in reversed(updates):
            update = schema.load("profile_update", self.objs.blob(entry.oid), self.limits)
            if as_of is None or _instant(str(update["updated_at"])) <= _instant(as_of):
                return corrected(doc, update)
        return doc

    def _teammate_files(self, directory: str) -> tuple[TreeEntry, list[TreeEntry]] | None:
        """A teammate directory's ``profile.json`` and update files (oldest first), or
        None when it holds no profile."""
        profile = None
        updates: list[tuple[int, TreeEntry]] = []
        for e in self.objs.tree(directory):
            if e.name == layout.PROFILE_FILE:
                profile = e
            else:
                number = layout.profile_update_number(e.name)
                if number is not None:
                    updates.append((number, e))
        if profile is None:
            return None
        updates.sort(key=lambda pair: pair[0])
        return profile, [e for _, e in updates]

    def profile_updates(self, handle: str) -> int:
        """How many corrections ``handle`` made to their profile (the last update's
        number: the rules keep them numbered from 1 with no gaps)."""
        folded = handle_key(handle)
        key = self._teammates()
        if key is None:
            dirs = []
        elif self.sharded:
            own = self._own_dir(handle)
            dirs = [own.oid] if own is not None else []
        else:
            dirs = [e.oid for e in self.objs.tree(key[0])
                    if e.is_tree and handle_key(e.name) == folded]
        found = self._teammate_files(dirs[-1]) if dirs else None
        if not found or not found[1]:
            return 0
        return layout.profile_update_number(found[1][-1].name) or 0

    def profile_as_of(self, handle: str, when: str) -> dict[str, Any] | None:
        """``handle``'s profile as it read at the relay time ``when``: a thread shows
        its people under the names they had when it was opened."""
        current = self.profile(handle)
        if current is None:
            return None
        return self._read_profile(str(current["handle"]), as_of=when)


    def thread(self, thread_id: str) -> ThreadState | None:
        found = thread_files(self.objs, self.tree, thread_id)
        if found is None:
            return None
        dir_oid, entries = found
        names = frozenset(e.name for e in entries)
        data = self.objs.read_path(dir_oid, layout.HANDOFF_FILE)
        if data is None:
            return None
        handoff = schema.load("handoff", data, self.limits)
        return ThreadState(thread_id, handoff, names)


# archive.json's blob id -> the snapshot's tree id (both fixed by the blob's bytes)
_SNAPSHOTS: dict[str, str] = {}


def snapshot_tree(objs: Objects, tree: str) -> str | None:
    """The tree of the archive snapshot the relay tree ``tree`` names, or None."""
    entry = objs.entry(tree, layout.ARCHIVE_PATH)
    if entry is None or entry.is_tree:
        return None
    found = _SNAPSHOTS.get(entry.oid)
    if found is None:
        doc = schema.load("archive", objs.blob(entry.oid))
        found = objs.commit(str(doc["snapshot"])).tree
        remember(_SNAPSHOTS, entry.oid, found)
    return found


def thread_files(objs: Objects, tree: str, thread_id: str
                 ) -> tuple[str, list[TreeEntry]] | None:
    """A thread's directory in the relay tree ``tree``: its tree id and entries.

    An archived thread's directory is no longer in the tree: it lies at the
    same path in the archive snapshot that ``archive.json`` names, so it reads
    the same.
    """
    entry = objs.entry(tree, layout.shard(thread_id))
    if entry is not None and entry.is_tree:
        return entry.oid, objs.tree(entry.oid)
    snap = snapshot_tree(objs, tree)
    if snap is not None:
        entry = objs.entry(snap, layout.shard(thread_id))
        if entry is not None and entry.is_tree:
            return entry.oid, objs.tree(entry.oid)
    return None


def corrected(profile: Mapping[str, Any], update: Mapping[str, Any]) -> dict[str, Any]:
    """A profile with an update's name, role and server usernames."""
    return {**profile, "name": update["name"], "role": update["role"],
            "usernames": list(update["usernames"])}


def _instant(stamp: str) -> str:
    """A relay time that compares as text: its fraction written out to six digits."""
    fraction = stamp[19:-1].lstrip(".")
    return f"{stamp[:19]}.{fraction:0<6}"


def resolve_thread_id(ref: str, view: Callable[[], RelayView]) -> str:
    """The full thread id that ``ref``, an id or a unique prefix of one, names.

    A full id is checked and given back without reading the relay: ``view`` (the
    relay to look in, main's tree and the archive snapshot) is called only for a
    prefix, so that a write on a full id reads nothing more than it writes.
    """
    ref = read_thread_ref(ref)
    if len(ref) == 26:
        return check_thread_id(ref)
    relay = view()
    candidates: set[str] = set()
    snapshot = snapshot_tree(relay.objs, relay.tree)
    for tree in (relay.tree, snapshot) if snapshot else (relay.tree,):
        if len(ref) >= 2:
            shard = f"{layout.THREADS_DIR}/{ref[0]}/{ref[1]}"
            candidates |= {e.name for e in relay.objs.list_dir(tree, shard) or []}
            continue
        for c0 in relay.objs.list_dir(tree, layout.THREADS_DIR) or []:
            if c0.name.startswith(ref[:1]):
                for c1 in relay.objs.tree(c0.oid):
                    candidates |= {e.name for e in relay.objs.tree(c1.oid)}
    return resolve_prefix(ref, sorted(candidates))
