"""git over ssh: OpenSSH sshd with one forced-command key per teammate.

sshd runs in the foreground (``-D -e``) with a config, host key, pid file and
authorized_keys file of its own in a private temp dir, on a free port of
127.0.0.1. Every teammate has an ed25519 key pair; all keys log in as the
current OS user (root in CI) and each is bound to
``forced_command.py <teammate>``, which allows only git-receive-pack /
git-upload-pack inside the served root and tells the hooks who pushed in
``GITRELAY_SSH_USER``.
"""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from . import (
    DEFAULT_USERS,
    GitServer,
    ManagedProcess,
    ServerStartError,
    check_user_name,
    free_port,
    hermetic_git_env,
    require_binaries,
    stop_all,
    wait_for_tcp,
)

__all__ = ["FORCED_COMMAND", "PUSHER_ENV", "SshGitServer", "ssh_git_server"]

#: What the hooks read to learn who pushed over ssh (set by the forced command).
PUSHER_ENV = "GITRELAY_SSH_USER"

FORCED_COMMAND = Path(__file__).resolve().with_name("forced_command.py")

_KEY_OPTIONS = "no-pty,no-port-forwarding,no-X11-forwarding,no-agent-forwarding,no-user-rc"
_PORT_ATTEMPTS = 5


@dataclass
class SshGitServer(GitServer):
    login: str = "root"  # OS account every teammate's key logs in as
    ssh: str = "ssh"  # client binary
    ssh_keygen: str = "ssh-keygen"
    keys: dict[str, Path] = field(default_factory=dict)  # teammate -> private key
    forced_command_log: Path | None = None

    def url(self, repo: str, user: str) -> str:
        # The teammate is chosen by the key in client_env(user), not by the URL.
        return f"ssh://{self.login}@{self.host}:{self.port}/{repo}"

    def ssh_argv(self, identity: Path) -> list[str]:
        """ssh client command line (without the destination) using ``identity``:
        no user config, no agent, no known_hosts, never prompts."""
        return [
            self.ssh,
            "-F", "/dev/null",
            "-i", str(identity),
            "-p", str(self.port),
            "-o", "IdentitiesOnly=yes",
            "-o", "IdentityAgent=none",
            "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null",
            "-o", "GlobalKnownHostsFile=/dev/null",
            "-o", "BatchMode=yes",
            "-o", "ConnectTimeout=10",
            # Faster than the post-quantum default on loopback (~60 ms a connection).
            "-o", "KexAlgorithms=curve25519-sha256,sntrup761x25519-sha512@openssh.com",
            "-o", "LogLevel=ERROR",
        ]  # fmt: skip

    @property
    def destination(self) -> str:
        return f"{self.login}@{self.host}"

    def client_env(self, user: str, identity: Path | None = None) -> dict[str, str]:
        env = hermetic_git_env(user)
        key = self.keys[user] if identity is None else identity
        env["GIT_SSH_COMMAND"] = shlex.join(self.ssh_argv(key))
        env["GIT_SSH_VARIANT"] = "ssh"
        return env

    def add_user(self, user: str) -> None:
        check_user_name(user)
        key = self.workdir / "keys" / user
        for old in (key, key.with_suffix(".pub")):
            old.unlink(missing_ok=True)
        _keygen(self.ssh_keygen, key, comment=f"{user}@acme")
        self.keys[user] = key
        self._write_authorized_keys()

    def bad_credentials(self, repo: str, user: str) -> tuple[str, dict[str, str]]:
        stranger = self.workdir / "unregistered" / "id_ed25519"
        if not stranger.exists():
            stranger.parent.mkdir(exist_ok=True)
            _keygen(self.ssh_keygen, stranger, comment="stranger@elsewhere")
        return self.url(repo, user), self.client_env(user, identity=stranger)

    @property
    def users(self) -> list[str]:
        return sorted(self.keys)

    @property
    def authorized_keys(self) -> Path:
        return self.workdir / "authorized_keys"

    def _write_authorized_keys(self) -> None:
        lines = []
        for user, key in sorted(self.keys.items()):
            argv = [sys.executable, "-I", "-S", str(FORCED_COMMAND), "--root", str(self.root)]
            if self.forced_command_log is not None:
                argv += ["--log", str(self.forced_command_log)]
            command = shlex.join([*argv, user])
            if '"' in command or "\\" in command:
                raise ValueError(f"cannot put this command in authorized_keys: {command}")
            public = key.with_suffix(".pub").read_text().strip()
            lines.append(f'command="{command}",{_KEY_OPTIONS} {public}\n')
        # sshd reads the file on every login: a new key works at once.
        tmp = self.authorized_keys.with_suffix(".tmp")
        tmp.write_text("".join(lines))
        tmp.chmod(0o600)
        os.replace(tmp, self.authorized_keys)


def _keygen(ssh_keygen: str, path: Path, comment: str) -> None:
    subprocess.run(
        [ssh_keygen, "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(path)],
        check=True,
        stdin=subprocess.DEVNULL,
        capture_output=True,
    )


def _sshd_config(server: SshGitServer, host_key: Path, pid_file: Path) -> str:
    root_login = "forced-commands-only" if server.login == "root" else "no"
    return f"""\
ListenAddress {server.host}:{server.port}
HostKey {host_key}
PidFile {pid_file}
AuthorizedKeysFile {server.authorized_keys}
AuthorizedKeysCommand none
AuthorizedPrincipalsFile none
AllowUsers {server.login}
PermitRootLogin {root_login}
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
HostbasedAuthentication no
UsePAM no
StrictModes no
UseDNS no
PermitUserEnvironment no
PermitUserRC no
PermitTTY no
DisableForwarding yes
PermitTunnel no
PrintMotd no
PrintLastLog no
AcceptEnv GIT_PROTOCOL
# bash started by sshd sources ~/.bashrc even for a forced command (Debian
# builds it with SSH_SOURCE_BASHRC) unless it thinks it is a nested shell:
# that costs time and any output would corrupt the git protocol.
SetEnv SHLVL=1
LoginGraceTime 30
MaxStartups 50:30:100
LogLevel VERBOSE
"""


@contextmanager
def ssh_git_server(root: Path, users: Iterable[str] = DEFAULT_USERS) -> Iterator[SshGitServer]:
    """Serve the bare repos under ``root`` over ssh, one key per teammate.

    Skips (or fails, with ``GITRELAY_REQUIRE_SERVERS=1``) when sshd, ssh or
    ssh-keygen is missing. All processes, including per-connection sshd
    children and the git commands they run, are killed on exit.
    """
    bins = require_binaries(["sshd", "ssh", "ssh-keygen", "git"])
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="gitrelay-ssh-"))
    procs: list[ManagedProcess] = []
    try:
        t0 = time.monotonic()
        if any(c in str(workdir) for c in ' "\\\n'):
            raise ServerStartError(f"sshd_config cannot name this temp dir: {workdir!r}")
        (workdir / "keys").mkdir()
        if os.geteuid() == 0:
            # sshd's privilege separation directory; normally made by the service.
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        host_key = workdir / "ssh_host_ed25519_key"
        _keygen(bins["ssh-keygen"], host_key, comment="gitrelay-test-host")

        command_log = workdir / "forced-command.log"
        command_log.touch()
        server = SshGitServer(
            kind="ssh",
            root=root,
            pusher_env=PUSHER_ENV,
            host="127.0.0.1",
            port=0,
            workdir=workdir,
            processes=procs,
            login=pwd.getpwuid(os.geteuid()).pw_name,
            ssh=bins["ssh"],
            ssh_keygen=bins["ssh-keygen"],
            forced_command_log=command_log,
        )
        for user in users:
            server.add_user(user)

        conf = workdir / "sshd_config"
        pid_file = workdir / "sshd.pid"
        env = {
            "PATH": os.pathsep.join([str(Path(bins["git"]).parent), "/usr/bin", "/bin"]),
            "LC_ALL": "C",
        }
        for attempt in range(_PORT_ATTEMPTS):
            server.port = free_port(server.host)
            conf.write_text(_sshd_config(server, host_key, pid_file))
            log = workdir / "sshd.log"
            log.write_text("")
            # sshd must be started by absolute path (it re-executes itself).
            sshd = ManagedProcess(
                "sshd",
                [bins["sshd"], "-D", "-e", "-f", str(conf)],
                log,
                env=env,
                extra_logs=[command_log],
            )
            procs.append(sshd)
            sshd.start()
            try:
                wait_for_tcp(server.host, server.port, sshd)
                break
            except ServerStartError:
                sshd.stop()
                procs.remove(sshd)
                in_use = "Address already in use" in log.read_text(errors="replace")
                if not in_use or attempt == _PORT_ATTEMPTS - 1:
                    raise
        server.startup_seconds = time.monotonic() - t0
        yield server
    finally:
        stop_all(procs)
        shutil.rmtree(workdir, ignore_errors=True)
