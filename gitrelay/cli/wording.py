"""How a refusal reads to a person: ``gitrelay: name (code): message`` and the
command to run next.

The relay raises errors with their next step as a value
(:class:`gitrelay.core.errors.NextStep`) and the data it needs (the thread, the
file, the join to run); this is a person's wording of every step, naming
``gitrelay`` commands and flags. The MCP server words the same steps for an
agent, as tools and arguments (:mod:`gitrelay.mcp.wording`). Nothing below the
front ends puts a next step into words.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence

from gitrelay.core.errors import NextStep, RelayError, next_step_of, then
from gitrelay.core.terminal import quoted

__all__ = ["STEP_TEXT", "error_text", "next_step_text", "ssh_fix"]


def _thread(err: RelayError) -> str:
    tid = err.thread_id
    return tid[:6] if tid else "THREAD"


def _join(err: RelayError) -> str:
    """The ``gitrelay join`` line a join refusal's ``join`` data names."""
    from gitrelay.relay.joining import join_command

    given = err.data.get("join")
    values = dict(given) if isinstance(given, dict) else {}
    return join_command(
        str(values.get("relay_url") or "RELAY"), str(values.get("handle") or "HANDLE"),
        name=str(values.get("name") or "NAME"), role=str(values.get("role") or "ROLE"),
        email=values.get("email"), usernames=list(values.get("usernames") or []),
        signing_key=values.get("signing_key"), expect_tip=values.get("expect_tip"))


_HANDLE_TAKEN = ("If you did not register it, someone else took your handle: do not use "
                 "this relay as it, and tell the relay's owner (docs/identity.md, \"A handle "
                 "registered by someone else\"). If you did, pass the same --username and "
                 "--signing-key as then.")


def _join_with_username(err: RelayError) -> str:
    from gitrelay.relay.joining import YOUR_SERVER_USERNAME

    pusher = err.data.get("pusher")
    if pusher:
        given = ", ".join(quoted(u) for u in err.data.get("given") or []) or "no username"
        return (f"The git server knows you as {quoted(str(pusher))} (you gave {given}); "
                f"nothing was registered: run `{_join(err)}`.")
    join = err.data.get("join")
    names: Sequence[object] = join.get("usernames") or [] if isinstance(join, dict) else []
    if not names or list(names) == [YOUR_SERVER_USERNAME]:
        return f"Run `{_join(err)}` with your username on the git server."
    return f"If those are your usernames on the git server, run `{_join(err)}`. " + _HANDLE_TAKEN


# What fixes each ssh failure (``ssh_problem``, from gitrelay.core.gitcli.SSH_PROBLEMS).
_SSH_FIXES: dict[str, str] = {
    "host_key_changed": "The host's ssh key changed since you last connected: ask whoever "
                        "runs {host} whether that is expected before you remove the old key "
                        "(`ssh-keygen -R {host}`)",
    "host_key_unknown": "Your ssh does not know {host}'s host key yet, and gitrelay runs ssh "
                        "with BatchMode=yes, so it cannot ask: connect once yourself with "
                        "`{ssh}`, check the fingerprint with whoever runs the host and answer "
                        "yes; then run the command again",
    "connection_refused": "Nothing accepts ssh connections at {host}: check the host and port "
                          "in the relay URL and that the ssh server runs",
    "unknown_host": "Check the host name in the relay URL (and your network or VPN)",
    "timed_out": "No answer from {host}: check your network or VPN and the port in the "
                 "relay URL",
    "no_route": "No route to {host}: check your network or VPN",
    "key_refused": "The server refused your ssh key: check that it is loaded (`ssh-add -l`) "
                   "and that the git account on {host} has its public key",
    "no_key": "You have no ssh key for {host} to accept: make one (`ssh-keygen -t ed25519`) "
              "and give its public half (~/.ssh/id_ed25519.pub) to whoever runs the git "
              "server",
}


def ssh_fix(err: RelayError) -> str:
    """What fixes the ssh failure ``err`` carries (``ssh_problem``, ``ssh_host``,
    ``ssh_command``), as one sentence."""
    problem = str(err.data.get("ssh_problem", ""))
    host = str(err.data.get("ssh_host") or "the relay's host")
    ssh = str(err.data.get("ssh_command") or "ssh -p PORT USER@HOST, with your relay URL's parts")
    fix = _SSH_FIXES.get(problem, "ssh could not reach {host}: check the relay URL and your "
                                  "ssh setup")
    return fix.format(host=host, ssh=ssh) + "."


def _queued(err: RelayError, text: str) -> str:
    return then(text, "Your operations are queued and will be retried.") \
        if err.data.get("queued") else text


def _did_you_mean(err: RelayError, otherwise: str) -> str:
    near = err.data.get("did_you_mean")
    return f"Did you mean {near}?" if near else otherwise


def _longer_id(err: RelayError) -> str:
    matching = err.data.get("matching") or []
    if not matching:
        return "Give more characters of the id."
    from gitrelay.core.readable import short_id

    return f"Give more characters of the id, e.g. `{short_id(str(matching[0]))}`."


def _filters(err: RelayError) -> str:
    from gitrelay.inbox.searchquery import FILTERS

    listed = ", ".join(f"{f}:" for f in err.data.get("filters") or FILTERS)
    if err.data.get("quote"):
        return (f"Filters are {listed}; to search the text itself, quote it: "
                f"\"{err.data['quote']}\".")
    return f'Words, "exact phrases" and the filters {listed}.'


def _trust_file(err: RelayError) -> str:
    near = err.data.get("did_you_mean")
    if near:
        return f"Rename the key to {near}; the file is not used until it is valid."
    where = err.data.get("path") or "the trust file"
    return f"Fix {where} (see docs/trust.md); it is not used until it is valid."


def _config(err: RelayError) -> str:
    where = err.data.get("path") or "your gitrelay config"
    return f"Fix {where} or run `gitrelay join` again to rewrite it."


def _file(err: RelayError) -> str:
    where = err.data.get("path") or "the file named above"
    return f"Fix {where} (or move it away) and run the command again."


def _host_entry(err: RelayError) -> str:
    table = err.data.get("table", "mcp_servers.gitrelay")
    command = json.dumps(str(err.data.get("command", "gitrelay")), ensure_ascii=False)
    args = json.dumps(list(err.data.get("args") or ["mcp"]), ensure_ascii=False)
    where = f" to {err.data['path']}" if err.data.get("path") else ""
    return f"Add it by hand{where}: [{table}] with command = {command} and args = {args}."


def _verify(err: RelayError) -> str:
    if err.data.get("queued"):
        return "Your operations stay queued until the relay is repaired (see `gitrelay verify`)."
    if err.data.get("relay"):
        return "Check the relay URL; `gitrelay verify` lists every problem."
    return "`gitrelay verify` lists every problem of the relay; tell the relay's admin."


def _sync_again(err: RelayError) -> str:
    if err.data.get("queued"):
        return ("Your operations are queued and will be retried; `gitrelay status --deliver` "
                "tries now.")
    return "Try again later; `gitrelay status` shows the relay's state and what is queued."


# Each step as a person reads it: the command to run, or what to do with their files.
STEP_TEXT: dict[NextStep, Callable[[RelayError], str]] = {
    NextStep.LIST_TEAMMATES: lambda e: _did_you_mean(e, "See who is with `gitrelay teammates`."),
    NextStep.CHECK_INBOX: lambda e: "`gitrelay inbox --json` lists your items and their item_id."
                                    if e.field == "item_id" else
                                    "`gitrelay inbox --all` lists your threads and their ids.",
    NextStep.LONGER_ID: _longer_id,
    NextStep.START_OVER: lambda e: "Run the command again without --cursor to start from the "
                                   "first page.",
    NextStep.FIX_ARGUMENT: lambda e: "Fix it and run the command again.",
    NextStep.NEW_DIRECTORY: lambda e: "Give a new path; it is built from scratch.",
    NextStep.FIX_QUERY: _filters,
    NextStep.VIEW_THREAD: lambda e: f"See the thread as it is now with "
                                    f"`gitrelay show {_thread(e)}`.",
    NextStep.NEW_HANDOFF: lambda e: "The thread is closed; `gitrelay send` starts a new one if "
                                    "more work is needed.",
    NextStep.NEW_KEY: lambda e: "Use another --key (or none) for a new handoff.",
    NextStep.FIX_INTENT_PAYLOAD: lambda e: "Give --proposed-action-file with --intent "
                                           "propose_action only, and --question with --intent "
                                           "ask_question only.",
    NextStep.ACCEPT_FIRST: lambda e: f"Accept it first with `gitrelay accept {_thread(e)}`, "
                                     "then complete it.",
    NextStep.NOT_ALLOWED: lambda e: "Nothing was changed: this is for someone else to do.",
    NextStep.LEAVE_TO_OTHER_COPY: lambda e: "Another session of yours holds this item; leave "
                                            "it to that one.",
    NextStep.TRUST_SENDER: lambda e: "Nothing was changed. If this is wrong, `gitrelay trust "
                                     f"add {e.data.get('sender', 'HANDLE')}` trusts them "
                                     "(docs/trust.md).",
    NextStep.UNBLOCK_SENDER: lambda e: "Nothing was changed. If this is wrong, `gitrelay trust "
                                       f"remove {e.data.get('sender', 'HANDLE')}` unblocks them "
                                       "(docs/trust.md).",
    NextStep.FIX_TRUST_FILE: _trust_file,
    NextStep.REINDEX: lambda e: "`gitrelay reindex` rebuilds it from the relay's history.",
    NextStep.TRY_AGAIN_SOON: lambda e: "Try again in a minute.",
    NextStep.FIX_CONFIG: _config,
    NextStep.FIX_FILE: _file,
    NextStep.CHECK_IDENTITY: lambda e: "Check the handle you run as (your config or --as), or "
                                       "join the relay first with `gitrelay join`.",
    NextStep.FIX_SIGNING_KEY: lambda e: "Check signing_key in your gitrelay config: pass the "
                                        "private key whose .pub lies next to it, or the .pub of "
                                        "a key held by ssh-agent (a key with a passphrase must "
                                        "be held by ssh-agent).",
    NextStep.INSTALL_OPENSSH: lambda e: "Install OpenSSH's client tools (ssh-keygen).",
    NextStep.INSTALL_GIT: lambda e: "Install git 2.30 or newer.",
    NextStep.INSTALL_GITRELAY: lambda e: "Run it through the installed `gitrelay` command.",
    NextStep.FIX_HOST_FILE: lambda e: "Fix that line or move the file away, then run "
                                      "`gitrelay setup` again.",
    NextStep.EDIT_HOST_FILE: _host_entry,
    NextStep.REVIEW_TEAM_ENTRY: lambda e: (
        "Check what it runs: the file is the team's, committed with the project. "
        f"`gitrelay setup {e.data.get('host', 'HOST')} --project --replace` writes the "
        "standard entry in its place; or set gitrelay up in your own settings with "
        f"`gitrelay setup {e.data.get('host', 'HOST')}`, and decline the project's server "
        "when the host asks."),
    NextStep.SET_EXAMPLE_DIR: lambda e: f"Set {e.data.get('env', 'GITRELAY_EXAMPLE')} to the "
                                        "example-repo directory.",
    NextStep.JOIN: lambda e: "Register first with `gitrelay join RELAY --as HANDLE --name NAME "
                             "--role ROLE`.",
    NextStep.CONFIRM_SWITCH: lambda e: "Pass --force to switch, or give the other person their "
                                       "own GITRELAY_HOME.",
    NextStep.JOIN_AS_REGISTERED: lambda e: f"If that is you, run `{_join(e)}`; if not, choose "
                                           "another handle.",
    NextStep.JOIN_WITH_KEY: lambda e: f"Run `{_join(e)} --signing-key ~/.ssh/id_ed25519` with "
                                      "the path of the key you registered.",
    NextStep.JOIN_WITH_USERNAME: _join_with_username,
    NextStep.HANDLE_TAKEN: lambda e: _HANDLE_TAKEN,
    NextStep.FREE_USERNAME: lambda e: (
        f"If {e.data.get('owner', 'that handle')} is a handle you mistyped when you joined "
        "before, free the username with `gitrelay profile --as "
        f"{e.data.get('owner', 'HANDLE')} --username ''` and then run `{_join(e)}`; if it is "
        "a teammate's, ask them or the relay's owner."),
    NextStep.JOIN_NEAR_HANDLE: lambda e: (
        f"If you are {e.data.get('did_you_mean', 'that teammate')}, run `{_join(e)}`; if "
        "you are a new teammate whose handle only looks like theirs, run the same join "
        "again with --new."),
    NextStep.SYNC_AGAIN: _sync_again,
    NextStep.CHECK_RELAY_URL: lambda e: _queued(e, "Check the relay URL and your access to it."),
    NextStep.FIX_SSH: lambda e: _queued(e, ssh_fix(e)),
    NextStep.NOT_A_RELAY: lambda e: "Check the relay URL; if it is the repository meant for "
                                    "the relay, make it one with `gitrelay init` on the git "
                                    "host (`gitrelay docs deploying`).",
    NextStep.VERIFY_RELAY: _verify,
    NextStep.ASK_ADMIN: lambda e: "Nothing of it was kept. Ask the relay's admin: `gitrelay "
                                  "doctor` checks its gate, `gitrelay verify` lists what it "
                                  "holds.",
    NextStep.GET_PIN: lambda e: "Ask a teammate on the relay to run `gitrelay status --pin` and "
                                "send you the line it prints, or copy `main is at …` from "
                                "`gitrelay verify`.",
    NextStep.RESET_TIP_FILE: lambda e: "Restore it from where the last run kept it, or delete "
                                       "it to start again without a pin (the next run writes "
                                       "one).",
    NextStep.GIVE_RELAY: lambda e: "Name the relay, for example `gitrelay verify "
                                   "/srv/git/relay.git`, or join one with `gitrelay join`.",
}


def next_step_text(err: RelayError) -> str:
    """What the person does next: the error's step as a command ("" when it has none)."""
    step = next_step_of(err)
    return STEP_TEXT[step](err) if step is not None else ""


def error_text(err: RelayError) -> str:
    """``name (code): message`` plus what to do next."""
    return then(f"{err.name} ({err.code}): {err.message}", next_step_text(err))
