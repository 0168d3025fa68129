"""Creating a relay, installing its gate, and joining one.

``init_relay`` makes a bare repository with the gate installed (the hook
runs this package's gate with an absolute interpreter path, no shell
lookups) and a first commit holding ``relay.json``. ``join`` makes the
user's mirror and registers the teammate through the gate.
"""

from __future__ import annotations

import re
import shlex
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gitrelay.core import layout, schema
from gitrelay.core.errors import (
    ConfigError,
    Forbidden,
    InvalidArgument,
    NextStep,
    RelayError,
    RelayUnavailable,
)
from gitrelay.core.gatehook import hook_script
from gitrelay.core.ids import check_handle, same_handle, typo_of
from gitrelay.core.ops import Op, now_iso
from gitrelay.core.terminal import quoted
from gitrelay.core.view import RelayView
from gitrelay.core.vocab import OPTIONAL_LIMITS
from gitrelay.store.config import UserConfig, mirror_path, save_user_config
from gitrelay.store.gitstore import Store
from gitrelay.store.mirror import Mirror
from gitrelay.sync.push import Syncer
from gitrelay.sync.verify import check_pin, pin_problem

PUSHER_ENV_DEFAULT = ["REMOTE_USER", "GL_USER", "GITEA_PUSHER_NAME", "GL_USERNAME",
                      "GITHUB_USER_LOGIN", "GITRELAY_SSH_USER"]


def install_hook(repo: Path, python: str | None = None) -> Path:
    hook = Path(repo) / "hooks" / "pre-receive"
    hook.parent.mkdir(parents=True, exist_ok=True)
    hook.write_text(hook_script(python))
    hook.chmod(0o755)
    return hook


def relay_config(name: str, *, web_url_template: str | None = None,
                 pusher_env: Sequence[str] = PUSHER_ENV_DEFAULT, require_pusher: bool = False,
                 require_signatures: bool = False,
                 stall_days: int | None = None) -> dict[str, object]:
    # stall_days is written only when chosen: at its default, clients from before it
    # existed still read the relay (they refuse a relay.json field they do not know).
    stall = {} if stall_days is None else {"stall_days": stall_days}
    return {"format_version": layout.FORMAT_VERSION, "kind": "config", "name": name,
            # An optional limit is left out at its default: clients from before it existed
            # refuse a relay.json field they do not know.
            "limits": {k: v for k, v in schema.DEFAULT_LIMITS.items()
                       if k not in OPTIONAL_LIMITS},
            "web_url_template": web_url_template,
            "pusher_env": list(pusher_env), "require_pusher": require_pusher,
            "require_signatures": require_signatures, "created_at": now_iso(),
            # A new relay keeps its teammates in shards (docs/format.md); a relay made
            # before sharding leaves the field out and stays flat.
            "teammates_layout": layout.TEAMMATES_SHARDED, **stall}


# Loose objects after which a push makes git pack them (in the background).
RELAY_GC_AUTO = 1000


def init_relay(path: Path, *, name: str | None = None, web_url_template: str | None = None,
               require_pusher: bool = False, require_signatures: bool = False,
               pusher_env: Sequence[str] | None = None, hook: bool = True,
               stall_days: int | None = None) -> Path:
    """Create a bare relay at ``path`` with the gate and a first commit.

    ``pusher_env``: the variables that carry the authenticated pusher on this
    host (docs/deploying.md); name only the one(s) your server sets.
    """
    path = Path(path).resolve()
    if path.exists() and any(path.iterdir()) and not _empty_bare_repo(path):
        raise InvalidArgument(f"{path} exists and is neither empty nor an empty bare "
                              "repository", field="path")
    store = Store(path, create=True)
    # A repository made empty elsewhere (`git init --bare`, a hosting tool) points HEAD at
    # the branch the relay uses.
    store.repo.set_head(layout.MAIN_REF)
    cfg = store.repo.config
    cfg["receive.denyNonFastForwards"] = True
    cfg["receive.denyDeletes"] = True
    cfg["core.logAllRefUpdates"] = True
    cfg["receive.fsckObjects"] = True  # git refuses malformed objects before the gate runs
    # Pushes leave their objects loose, and receive-pack's connectivity check reads loose
    # trees more slowly than packed ones; git's default waits for ~6,700 of them before
    # packing (docs/deploying.md, "Keeping pushes fast").
    cfg["gc.auto"] = RELAY_GC_AUTO
    doc = relay_config(name or path.stem, web_url_template=web_url_template,
                       pusher_env=PUSHER_ENV_DEFAULT if pusher_env is None else pusher_env,
                       require_pusher=require_pusher, require_signatures=require_signatures,
                       stall_days=stall_days)
    schema.validate("config", doc)
    tree = store.single_file_tree(layout.CONFIG_PATH, schema.dumps(doc))
    message = (f"init relay {doc['name']}\n\n{layout.TRAILER_OP}: {layout.OP_INIT}\n"
               f"{layout.TRAILER_ACTOR}: gitrelay\n{layout.TRAILER_SEQ}: 0\n")
    commit = store.commit(tree=tree, parents=[], message=message, author="gitrelay",
                          email="gitrelay@localhost")
    store.set_ref(layout.MAIN_REF, commit, "gitrelay init")
    if hook:
        install_hook(path)
    return path


def _empty_bare_repo(path: Path) -> bool:
    """Whether ``path`` is a bare git repository with no refs and no objects yet."""
    if not (path / "HEAD").is_file() or not (path / "objects").is_dir():
        return False
    if any(p.is_file() for p in (path / "refs").rglob("*")):
        return False
    packed = path / "packed-refs"
    if packed.is_file() and any(not ln.startswith(("#", "^")) and ln.strip()
                                for ln in packed.read_text(errors="replace").splitlines()):
        return False
    return not any(p.is_file() for p in (path / "objects").rglob("*")
                   if p.parent.name not in ("info",))


def ensure_default_relay(path: Path) -> Path:
    if not (path / "HEAD").exists():
        init_relay(path, name="local")
    return path


def profile_doc(handle: str, name: str, role: str, *, email: str | None = None,
                usernames: Sequence[str] = (), signing_keys: Sequence[str] = ()
                ) -> dict[str, object]:
    doc: dict[str, object] = {"format_version": layout.FORMAT_VERSION, "kind": "profile",
                              "handle": handle, "name": name, "role": role,
                              "usernames": list(usernames), "registered_at": now_iso()}
    if email:
        doc["email"] = email
    if signing_keys:
        doc["signing_keys"] = list(signing_keys)
    schema.validate("profile", doc)
    return doc


def normalize_relay_url(url: str) -> str:
    """An existing local path becomes absolute, so the config works from anywhere."""
    if "://" not in url:
        path = Path(url).expanduser()
        if path.exists():
            return str(path.resolve())
    return url


def join_command(relay_url: str, handle: str, *, name: str, role: str,
                 email: str | None = None, usernames: Sequence[str] = (),
                 signing_key: str | None = None, expect_tip: str | None = None,
                 new: bool = False) -> str:
    """The ``gitrelay join`` line with these values, quoted for a shell."""
    argv = ["gitrelay", "join", relay_url, "--as", handle, "--name", name, "--role", role]
    if email:
        argv += ["--email", email]
    for username in usernames:
        argv += ["--username", username]
    if signing_key:
        argv += ["--signing-key", signing_key]
    if expect_tip:
        argv += ["--expect-tip", expect_tip]
    if new:
        argv += ["--new"]
    return shlex.join(argv)


def join_values(relay_url: str, handle: str, *, name: str, role: str,
                email: str | None = None, usernames: Sequence[str] = (),
                signing_key: str | None = None, expect_tip: str | None = None
                ) -> dict[str, Any]:
    """The values of a join, as a join refusal carries them in its ``join`` data: the
    front ends word the join to run next from them (:func:`join_command`), every flag
    given kept."""
    return {"relay_url": relay_url, "handle": handle, "name": name, "role": role,
            "email": email, "usernames": list(usernames), "signing_key": signing_key,
            "expect_tip": expect_tip}


def check_newcomer(view: RelayView, handle: str, usernames: Sequence[str], *, new: bool,
                   join: Callable[[str], dict[str, Any]]) -> None:
    """Refuse, before anything is written, a registration that is most likely a mistake:
    a server username that already belongs to another handle (a typo of the joiner's own
    earlier, or a teammate's), or a handle one typo away from a registered one (unless
    ``new``). ``join(handle)`` gives the values of the join to run instead."""
    for username in usernames:
        owner = view.username_owner(username)
        if owner is not None:
            raise Forbidden(f"the server username {quoted(username)} already belongs to "
                            f"{owner} on the relay, so {handle} cannot claim it; nothing "
                            "was registered", next_step=NextStep.FREE_USERNAME, owner=owner,
                            username=username, join=join(handle), field="usernames")
    if new:
        return
    others = [str(p["handle"]) for p in view.profiles().values()]
    near = typo_of(handle, others)
    if near is not None and not same_handle(near, handle):
        raise InvalidArgument(f"{handle} is not on the relay, but {near} is; nothing was "
                              "registered", next_step=NextStep.JOIN_NEAR_HANDLE,
                              did_you_mean=near, join=join(near), field="--as")


# Where a join refusal's server usernames would go when the relay does not say them.
YOUR_SERVER_USERNAME = "YOUR_SERVER_USERNAME"


def _check_usernames(handle: str, registered: Sequence[str], given: Sequence[str],
                     join: Callable[[Sequence[str]], dict[str, Any]]) -> None:
    """Refuse to take over a profile whose server usernames are not the joiner's."""
    mine = {u.casefold() for u in given}
    theirs = {str(u).casefold() for u in registered}
    if mine == theirs:
        return
    listed = ", ".join(quoted(u) for u in registered)
    if not mine:
        raise Forbidden(f"{handle} is already registered on the relay with the server "
                        f"username(s) {listed}; you gave none, so gitrelay cannot tell it "
                        "is yours", next_step=NextStep.JOIN_WITH_USERNAME,
                        join=join([str(u) for u in registered]), field="usernames")
    yours = ", ".join(quoted(u) for u in given)
    if not theirs:
        raise Forbidden(f"{handle} is already registered on the relay without server "
                        f"usernames, not with yours ({yours})",
                        next_step=NextStep.HANDLE_TAKEN, field="usernames")
    others = [quoted(u) for u in registered if str(u).casefold() not in mine]
    raise Forbidden(
        f"{handle} is already registered on the relay with the server username(s) {listed}, "
        f"not with yours ({yours})"
        + (f"; {', '.join(others)} {'is' if len(others) == 1 else 'are'} not yours"
           if others else ""),
        next_step=NextStep.HANDLE_TAKEN, field="usernames")


_PUSHER = re.compile(r"(?:authenticated pusher|but the pusher is) ['\"]([^'\"]+)['\"]")


def _registration_error(err: RelayError, usernames: Sequence[str],
                        join: Callable[[Sequence[str]], dict[str, Any]]) -> RelayError:
    """The gate's refusal of a registration, with the join to run instead when the relay
    knows who pushed and the profile named someone else (a typo, a forgotten
    --username): a registration claims only the pusher's own username, so the join
    names that one alone (``pusher``, with what was ``given``)."""
    if err.data.get("rule") not in ("pusher", "registration") or "supplied none" in err.message:
        return err
    found = _PUSHER.search(err.message)
    if found:
        name = found.group(1)
        return err.replaced(next_step=NextStep.JOIN_WITH_USERNAME, join=join([name]),
                            pusher=name, given=list(usernames))
    if err.data.get("rule") == "pusher":
        return err.replaced(next_step=NextStep.JOIN_WITH_USERNAME,
                            join=join([YOUR_SERVER_USERNAME]))
    return err


def join(relay_url: str, handle: str, *, name: str, role: str, email: str | None = None,
         usernames: Sequence[str] = (), signing_key: str | None = None,
         save: bool = True, env: dict[str, str] | None = None,
         progress: Callable[[str], None] | None = None,
         expect_tip: str | None = None,
         before_write: Callable[[], None] | None = None,
         ask_pin: Callable[[list[str]], str | None] | None = None,
         new: bool = False) -> UserConfig:
    """Make this user's mirror of ``relay_url`` and register them if needed.

    ``env``: extra environment for the ``git`` commands (e.g. ``GIT_SSH_COMMAND``).
    ``progress``: hears each step (fetching, checking a long history, registering).
    ``expect_tip``: a commit the relay's (verified) main must contain, known from a
    teammate or a CI job: a relay whose history was rewritten before this first
    fetch is refused rather than trusted.
    ``ask_pin``: without ``expect_tip``, when ``handle`` is not registered yet, called
    once the relay was fetched with the handles of the teammates registered on it; a
    pin it returns (from one of them, by a channel outside the relay) is checked as
    ``expect_tip`` would be.
    ``before_write``: called once the relay was read and checked, before anything is
    registered or saved; it may raise to stop the join (the CLI asks there before
    switching a configured machine to another handle).
    ``new``: register ``handle`` even though it is one typo from a registered handle.
    """
    check_handle(handle, "--as")
    if expect_tip is not None:
        check_pin(expect_tip)

    def values(names: Sequence[str], as_handle: str = handle) -> dict[str, Any]:
        return join_values(relay_url, as_handle, name=name, role=role, email=email,
                           usernames=names, signing_key=signing_key, expect_tip=expect_tip)

    if not name.strip() or not role.strip():
        raise InvalidArgument("--name and --role must not be empty")
    relay_url = normalize_relay_url(relay_url)
    from gitrelay.core.signing import read_public_key, signer_for

    signer = signer_for(signing_key) if signing_key else None
    path = mirror_path(relay_url)
    fresh = not path.exists()
    mirror = Mirror(path, handle, signer=signer)
    syncer = Syncer(mirror, relay_url, env=env, progress=progress)
    say = progress or (lambda _text: None)
    say(f"fetching {relay_url}…")
    try:
        syncer.fetch()
        newcomer = mirror.view().profile(handle) is None
        if expect_tip is None and ask_pin is not None and newcomer:
            others = sorted(str(p["handle"]) for p in mirror.view().profiles().values()
                            if not same_handle(str(p["handle"]), handle))
            expect_tip = ask_pin(others)
            if expect_tip is not None:
                expect_tip = check_pin(expect_tip)
        problem = (pin_problem(path, expect_tip, mirror.relay_main())
                   if expect_tip is not None else None)
        if problem is not None:
            raise RelayUnavailable(f"{relay_url} is not the relay you pinned: {problem}; "
                                   "nothing was registered", next_step=NextStep.ASK_ADMIN,
                                   relay=relay_url, field="expect_tip")
    except RelayError:
        if fresh:  # a mistyped, unreachable or unpinned relay leaves no mirror behind
            shutil.rmtree(path, ignore_errors=True)
        raise
    if before_write is not None:
        try:
            before_write()
        except BaseException:
            if fresh:
                shutil.rmtree(path, ignore_errors=True)
            raise
    existing = mirror.view().profile(handle)
    if existing is None:
        try:
            check_newcomer(mirror.view(), handle, usernames, new=new,
                           join=lambda who: values(usernames, who))
        except RelayError:
            if fresh:
                shutil.rmtree(path, ignore_errors=True)
            raise
        keys = [read_public_key(signing_key)] if signing_key else []
        say(f"registering {handle} on the relay…")
        mirror.append(Op("profile", profile_doc(handle, name, role, email=email,
                                                usernames=usernames, signing_keys=keys),
                         handle=handle))
        report = syncer.deliver()
        if report.refused:
            # Said here and now; the refused log need not repeat it in status and doctor.
            mirror.clear_refused({r.key for r in report.refused})
            raise _registration_error(report.refused[0].error(), usernames, values)
    elif existing["handle"] != handle:
        rejoin = values(usernames, existing["handle"])
        raise InvalidArgument(f"{existing['handle']} is already registered (handles ignore case)",
                              next_step=NextStep.JOIN_AS_REGISTERED, join=rejoin, field="--as")
    else:
        # Joining again (a second machine, a lost config): the profile is what it
        # is; the local config must be able to write as it, and it must be this
        # person's own, not one someone else registered under their handle.
        keys = existing.get("signing_keys", [])
        if keys and not signing_key:
            raise ConfigError(f"{handle} is registered with a signing key, and this join "
                              "gives none",
                              next_step=NextStep.JOIN_WITH_KEY, join=values(usernames),
                              field="signing_key")
        if signing_key and read_public_key(signing_key) not in keys:
            raise Forbidden(
                f"{handle} is already registered on the relay "
                + (f"with signing key(s) that are not yours ({signing_key} is not among them)"
                   if keys else "without a signing key, and you join with one"),
                next_step=NextStep.HANDLE_TAKEN, field="signing_key")
        _check_usernames(handle, existing.get("usernames", []), usernames, values)
        name, role, email = existing["name"], existing["role"], existing.get("email")
    cfg = UserConfig(relay=relay_url, handle=handle, name=name, role=role, email=email,
                     signing_key=signing_key)
    if save:
        save_user_config(cfg)
    return cfg

