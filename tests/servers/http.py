"""Smart HTTP git server: nginx (basic auth) -> fcgiwrap -> git http-backend.

nginx runs in the foreground with a config, pid file, logs and temp dirs of
its own in a private temp dir and listens on a free port of 127.0.0.1;
fcgiwrap runs in the foreground on a unix socket in the same dir and may only
execute ``git-http-backend``. Every request needs a teammate's password from
the htpasswd file this module writes; nginx hands the user name to
http-backend as ``REMOTE_USER``, which turns ``receive-pack`` on and reaches
the repository's hooks unchanged.
"""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import shutil
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
    wait_for_unix_socket,
)

__all__ = ["PUSHER_ENV", "HttpGitServer", "http_git_server"]

#: What the hooks read to learn who pushed over HTTP.
PUSHER_ENV = "REMOTE_USER"

_PORT_ATTEMPTS = 5


def _ssha(password: str) -> str:
    """nginx's ``{SSHA}`` htpasswd scheme: base64(sha1(password + salt) + salt)."""
    salt = secrets.token_bytes(8)
    digest = hashlib.sha1(password.encode() + salt).digest()
    return "{SSHA}" + base64.b64encode(digest + salt).decode()


def _q(value: object) -> str:
    """Quote a value for an nginx config file."""
    text = str(value)
    if any(c in text for c in "\n\r"):
        raise ValueError(f"newline in nginx config value: {text!r}")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass
class HttpGitServer(GitServer):
    passwords: dict[str, str] = field(default_factory=dict)

    def url(self, repo: str, user: str, password: str | None = None) -> str:
        secret = self.passwords[user] if password is None else password
        return f"http://{user}:{secret}@{self.host}:{self.port}/{repo}"

    def anonymous_url(self, repo: str) -> str:
        return f"http://{self.host}:{self.port}/{repo}"

    def client_env(self, user: str) -> dict[str, str]:
        return hermetic_git_env(user)

    def add_user(self, user: str) -> None:
        check_user_name(user)
        self.passwords[user] = secrets.token_urlsafe(12)
        self._write_htpasswd()

    def bad_credentials(self, repo: str, user: str) -> tuple[str, dict[str, str]]:
        return self.url(repo, user, password="not-" + self.passwords.get(user, "x")), (
            self.client_env(user)
        )

    @property
    def users(self) -> list[str]:
        return sorted(self.passwords)

    @property
    def htpasswd(self) -> Path:
        return self.workdir / "htpasswd"

    def _write_htpasswd(self) -> None:
        # nginx reads the file on every request: replacing it atomically is
        # enough for a new user to work while the server runs.
        tmp = self.htpasswd.with_suffix(".tmp")
        tmp.write_text("".join(f"{u}:{_ssha(p)}\n" for u, p in sorted(self.passwords.items())))
        os.replace(tmp, self.htpasswd)


def _nginx_conf(
    server: HttpGitServer, socket_path: Path, backend: str, fcgi_path: str, as_root: bool
) -> str:
    w = server.workdir
    params = {
        "SCRIPT_FILENAME": _q(backend),
        "GIT_PROJECT_ROOT": _q(server.root),
        "GIT_HTTP_EXPORT_ALL": '""',
        "PATH_INFO": "$uri",
        "QUERY_STRING": "$query_string",
        "REQUEST_METHOD": "$request_method",
        "CONTENT_TYPE": "$content_type",
        "CONTENT_LENGTH": "$content_length",
        "REMOTE_USER": "$remote_user",
        "REMOTE_ADDR": "$remote_addr",
        "SERVER_NAME": "$server_name",
        "SERVER_PORT": "$server_port",
        "SERVER_PROTOCOL": "$server_protocol",
        "GATEWAY_INTERFACE": "CGI/1.1",
        # fcgiwrap gives the CGI only these params as its environment.
        "PATH": _q(fcgi_path),
        "HOME": _q(w / "home"),
        "GIT_CONFIG_NOSYSTEM": "1",
        # nginx would forward the Authorization header as HTTP_AUTHORIZATION,
        # i.e. the password to every hook; blank it.
        "HTTP_AUTHORIZATION": '""',
    }
    param_lines = "\n".join(f"            fastcgi_param {k} {v};" for k, v in params.items())
    user_line = "user root;" if as_root else ""
    return f"""\
daemon off;
master_process on;
worker_processes 1;
{user_line}
pid {_q(w / "nginx.pid")};
error_log {_q(w / "nginx-error.log")} info;
events {{ worker_connections 64; }}
http {{
    access_log {_q(w / "nginx-access.log")};
    client_body_temp_path {_q(w / "tmp" / "body")};
    fastcgi_temp_path {_q(w / "tmp" / "fastcgi")};
    proxy_temp_path {_q(w / "tmp" / "proxy")};
    uwsgi_temp_path {_q(w / "tmp" / "uwsgi")};
    scgi_temp_path {_q(w / "tmp" / "scgi")};
    server {{
        listen {server.host}:{server.port};
        server_name localhost;
        client_max_body_size 0;
        auth_basic "gitrelay test relay";
        auth_basic_user_file {_q(server.htpasswd)};
        location / {{
            fastcgi_pass unix:{socket_path};
            fastcgi_buffering off;
            fastcgi_read_timeout 120s;
{param_lines}
        }}
    }}
}}
"""


@contextmanager
def http_git_server(root: Path, users: Iterable[str] = DEFAULT_USERS) -> Iterator[HttpGitServer]:
    """Serve the bare repos under ``root`` over authenticated smart HTTP.

    Skips (or fails, with ``GITRELAY_REQUIRE_SERVERS=1``) when nginx, fcgiwrap
    or git-http-backend is missing. All processes are killed on exit.
    """
    bins = require_binaries(["nginx", "fcgiwrap", "git", "git-http-backend"])
    root = Path(root).resolve()
    root.mkdir(parents=True, exist_ok=True)
    # Short path: it holds a unix socket (sun_path is ~107 bytes).
    workdir = Path(tempfile.mkdtemp(prefix="gitrelay-http-", dir="/tmp"))
    procs: list[ManagedProcess] = []
    try:
        t0 = time.monotonic()
        for sub in ("home", "tmp"):
            (workdir / sub).mkdir()
        fcgi_path = os.pathsep.join(
            dict.fromkeys([str(Path(bins["git"]).parent), "/usr/local/bin", "/usr/bin", "/bin"])
        )
        socket_path = workdir / "fcgiwrap.sock"
        fcgiwrap = ManagedProcess(
            "fcgiwrap",
            [
                bins["fcgiwrap"],
                "-c",
                "4",
                "-s",
                f"unix:{socket_path}",
                "-p",
                bins["git-http-backend"],
            ],
            workdir / "fcgiwrap.log",
            env={"PATH": fcgi_path, "HOME": str(workdir / "home"), "LC_ALL": "C"},
        )
        procs.append(fcgiwrap)
        fcgiwrap.start()
        wait_for_unix_socket(socket_path, fcgiwrap)

        server = HttpGitServer(
            kind="http",
            root=root,
            pusher_env=PUSHER_ENV,
            host="127.0.0.1",
            port=0,
            workdir=workdir,
            processes=procs,
        )
        for user in users:
            server.add_user(user)

        conf = workdir / "nginx.conf"
        error_log = workdir / "nginx-error.log"
        for attempt in range(_PORT_ATTEMPTS):
            server.port = free_port(server.host)
            conf.write_text(
                _nginx_conf(
                    server,
                    socket_path,
                    bins["git-http-backend"],
                    fcgi_path,
                    as_root=os.geteuid() == 0,
                )
            )
            error_log.write_text("")
            nginx = ManagedProcess(
                "nginx",
                [bins["nginx"], "-p", f"{workdir}/", "-c", str(conf), "-e", str(error_log)],
                workdir / "nginx.log",
                env={"PATH": fcgi_path, "LC_ALL": "C"},
                extra_logs=[error_log],
            )
            procs.append(nginx)
            nginx.start()
            try:
                wait_for_tcp(server.host, server.port, nginx)
                break
            except ServerStartError:
                nginx.stop()
                procs.remove(nginx)
                in_use = "Address already in use" in error_log.read_text(errors="replace")
                if not in_use or attempt == _PORT_ATTEMPTS - 1:
                    raise
        server.startup_seconds = time.monotonic() - t0
        yield server
    finally:
        stop_all(procs)
        shutil.rmtree(workdir, ignore_errors=True)
