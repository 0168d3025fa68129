"""`gitrelay join` takes over an existing profile only when it is the joiner's own.

GIVEN a relay without a gate where mallory pushed a profile under dana's handle
(her server usernames or her signing key in it), WHEN the real dana joins, THEN
the join is refused, says why and what to do, and nothing is saved; dana's
own profile is joined again as before.
"""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from gitrelay.cli.main import main as cli_main
from gitrelay.cli.wording import next_step_text as person_wording
from gitrelay.core.errors import ConfigError, Forbidden, InvalidArgument
from gitrelay.relay import joining
from gitrelay.relay.client import RelayClient
from gitrelay.store.config import load_user_config
from tests.kit import forge, keygen, profile_op, public_key, push


@pytest.fixture
def hookless(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    relay = joining.init_relay(tmp_path / "relay.git", name="acme", hook=False)
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "mallory"))
    joining.join(str(relay), "mallory@acme", name="Mal Lory", role="intern", save=False)
    return relay


def squat(relay: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **fields: object
          ) -> None:
    """mallory pushes a profile for dana@acme, as anyone with write access can here."""
    from gitrelay.relay.client import RelayClient

    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "mallory"))
    mirror = RelayClient(str(relay), "mallory@acme").mirror
    oid = forge(mirror, profile_op("dana@acme", **fields))  # type: ignore[arg-type]
    assert push(mirror.path, str(relay), oid).returncode == 0


def dana_joins(relay: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
               **kwargs: object) -> joining.UserConfig:
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "dana"))
    return joining.join(str(relay), "dana@acme", name="Dana Kim", role="design",
                      **kwargs)  # type: ignore[arg-type]


def test_a_profile_holding_someone_elses_username_is_not_taken_over(
        hookless: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    squat(hookless, tmp_path, monkeypatch, usernames=["mallory", "dana"])

    with pytest.raises(Forbidden) as err:
        dana_joins(hookless, tmp_path, monkeypatch, usernames=["dana"])

    assert err.value.message == ('dana@acme is already registered on the relay with the '
                                 'server username(s) "mallory", "dana", not with yours '
                                 '("dana"); "mallory" is not yours')
    assert "someone else took your handle" in person_wording(err.value)
    assert load_user_config() is None


def test_a_profile_with_usernames_needs_them_to_join_again(
        hookless: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dana_joins(hookless, tmp_path, monkeypatch, usernames=["dana"], save=False)

    with pytest.raises(Forbidden) as err:
        dana_joins(hookless, tmp_path, monkeypatch)
    assert "you gave none" in err.value.message
    assert person_wording(err.value).startswith(
        f"If those are your usernames on the git server, run `gitrelay join {hookless} "
        "--as dana@acme")

    again = dana_joins(hookless, tmp_path, monkeypatch, usernames=["Dana"])
    assert again.handle == "dana@acme"


def test_a_profile_with_a_key_that_is_not_yours_is_not_taken_over(
        hookless: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mallory_key = keygen(tmp_path / "keys" / "mallory", "mallory@acme")
    dana_key = keygen(tmp_path / "keys" / "dana", "dana@acme")
    squat(hookless, tmp_path, monkeypatch, keys=[public_key(mallory_key)])

    with pytest.raises(Forbidden) as err:
        dana_joins(hookless, tmp_path, monkeypatch, signing_key=str(dana_key))
    assert "with signing key(s) that are not yours" in err.value.message
    with pytest.raises(ConfigError, match="and this join gives none"):
        dana_joins(hookless, tmp_path, monkeypatch)
    assert load_user_config() is None


def test_a_profile_without_a_key_is_not_taken_over_by_a_joiner_with_one(
        hookless: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dana_key = keygen(tmp_path / "keys" / "dana", "dana@acme")
    squat(hookless, tmp_path, monkeypatch)

    with pytest.raises(Forbidden, match="without a signing key, and you join with one"):
        dana_joins(hookless, tmp_path, monkeypatch, signing_key=str(dana_key))


# --------------------------------------------------------------------------- the server's word


@pytest.fixture
def checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A relay whose gate learns the pusher from REMOTE_USER (a local push hands the
    hook the pusher's environment, as a web server would set it), alice on it."""
    relay = joining.init_relay(tmp_path / "relay.git", name="acme", require_pusher=True,
                             pusher_env=["REMOTE_USER"])
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "alice"))
    joining.join(str(relay), "alice@acme", name="Alice Martin", role="backend",
               usernames=["alice"], env={"REMOTE_USER": "alice"}, save=False)
    return relay


@pytest.mark.parametrize("given", [["carl"], ["carl", "carol"], ["carol", "carl"]])
def test_a_username_the_server_does_not_know_as_the_joiner_is_refused(
        checked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str], given: list[str]) -> None:
    """carol typed carl: the server knows her as carol. The advice is a command that works
    (her username alone), never one that keeps the typo in a profile forever."""
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carol"))
    monkeypatch.setenv("REMOTE_USER", "carol")
    argv = ["join", str(checked), "--as", "carol@acme", "--name", "Carol Diaz", "--role",
            "platform"] + [x for u in given for x in ("--username", u)]

    assert cli_main(argv) != 0

    err = capsys.readouterr().err
    advice = (f"gitrelay join {checked} --as carol@acme --name 'Carol Diaz' --role platform "
              "--username carol")
    assert f"run `{advice}`" in err and "The git server knows you as \"carol\"" in err
    assert "--username carl" not in err
    assert load_user_config() is None
    assert cli_main(shlex.split(advice)[1:]) == 0  # the advice works as written
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "alice"))
    alice = RelayClient(str(checked), "alice@acme")
    alice.refresh(max_age=0)
    profile = alice.teammate("carol@acme")
    assert profile is not None and profile["usernames"] == ["carol"]


def test_joining_again_without_usernames_is_told_the_exact_command(
        checked: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "alice-laptop"))
    with pytest.raises(Forbidden) as err:
        joining.join(str(checked), "alice@acme", name="Alice Martin", role="backend")
    assert (f"run `gitrelay join {checked} --as alice@acme --name 'Alice Martin' --role "
            "backend --username alice`") in person_wording(err.value)


def test_every_join_refusal_names_a_command_that_works(
        hookless: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dana_key = keygen(tmp_path / "keys" / "dana", "dana@acme")
    dana_joins(hookless, tmp_path, monkeypatch, signing_key=str(dana_key), save=False)

    with pytest.raises(ConfigError, match="and this join gives none") as err:
        dana_joins(hookless, tmp_path, monkeypatch)
    assert (f"Run `gitrelay join {hookless} --as dana@acme --name 'Dana Kim' --role design "
            "--signing-key ~/.ssh/id_ed25519`") in person_wording(err.value)
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "dana"))
    with pytest.raises(InvalidArgument, match="already registered") as bad:
        joining.join(str(hookless), "DANA@acme", name="Dana Kim", role="design")
    assert f"`gitrelay join {hookless} --as dana@acme --name" in person_wording(bad.value)


# --- a typo caught before it is written --------------------------------------------------


def test_a_username_someone_holds_is_refused_before_anything_is_registered_and_says_the_fix(
        hookless: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # carol mistyped her handle once: carl@acme holds her server username.
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carol-typo"))
    joining.join(str(hookless), "carl@acme", name="Carol Diaz", role="qa", usernames=["carol"])
    pin = RelayClient(str(hookless), "carl@acme").mirror.relay_main()
    assert pin is not None
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carol"))

    with pytest.raises(Forbidden) as err:
        joining.join(str(hookless), "carol@acme", name="Carol Diaz", role="qa",
                   usernames=["carol"], expect_tip=pin, new=True)

    assert err.value.data["owner"] == "carl@acme"
    assert err.value.data["field"] == "usernames"
    said = person_wording(err.value)
    # The command that frees it, and the whole join to run after, every flag kept.
    assert "`gitrelay profile --as carl@acme --username ''`" in said
    assert (f"`gitrelay join {hookless} --as carol@acme --name 'Carol Diaz' --role qa "
            f"--username carol --expect-tip {pin}`") in said
    assert load_user_config() is None
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carol-typo"))
    client = RelayClient(str(hookless), "carl@acme")
    client.refresh(max_age=0)
    assert client.mirror.view().profile("carol@acme") is None


def test_a_handle_one_typo_from_a_registered_one_asks_and_new_insists(
        hookless: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carol"))
    joining.join(str(hookless), "carol@acme", name="Carol Diaz", role="qa", save=False)

    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carl"))
    with pytest.raises(InvalidArgument) as err:
        joining.join(str(hookless), "carl@acme", name="Carl Berg", role="ops")
    assert err.value.data["did_you_mean"] == "carol@acme"
    said = person_wording(err.value)
    assert f"run `gitrelay join {hookless} --as carol@acme --name 'Carl Berg'" in said
    assert "--new" in said
    assert load_user_config() is None

    cfg = joining.join(str(hookless), "carl@acme", name="Carl Berg", role="ops", new=True)
    assert cfg.handle == "carl@acme"
    # Numbered accounts are not typos of each other.
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "ci2"))
    setup_done = joining.join(str(hookless), "ci1@acme", name="CI one", role="bot", save=False)
    assert setup_done.handle == "ci1@acme"
    assert joining.join(str(hookless), "ci2@acme", name="CI two", role="bot",
                        save=False).handle == "ci2@acme"
    # A new teammate whose name is merely short and unlike any joins unasked.
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "dan"))
    assert joining.join(str(hookless), "dan@acme", name="Dan", role="ops").handle == "dan@acme"


def test_the_cli_join_refusal_of_a_near_handle_is_one_usage_line(
        hookless: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carol"))
    joining.join(str(hookless), "carol@acme", name="Carol Diaz", role="qa", save=False)
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "carl"))
    code = cli_main(["join", str(hookless), "--as", "carl@acme", "--name", "Carl", "--role",
                     "ops"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("gitrelay: invalid_argument")
    assert "carol@acme is" in err and "--new" in err
    assert cli_main(["join", str(hookless), "--as", "carl@acme", "--name", "Carl", "--role",
                     "ops", "--new"]) == 0


def test_joining_an_empty_repository_says_it_is_not_a_relay_yet_and_init_makes_it_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from tests.kit import git

    empty = tmp_path / "relay.git"
    git("init", "--quiet", "--bare", str(empty))
    monkeypatch.setenv("GITRELAY_HOME", str(tmp_path / "alice"))
    join = ("join", str(empty), "--as", "alice@acme", "--name", "Alice Martin", "--role",
            "backend")
    capsys.readouterr()
    code = cli_main(list(join))
    out = capsys.readouterr().err
    assert code == 4
    assert "is not a relay yet" in out and "couldn't find remote ref" not in out
    assert "`gitrelay init`" in out
    assert cli_main(["init", str(empty), "--name", "acme"]) == 0
    assert cli_main(list(join)) == 0
