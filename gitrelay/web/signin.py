"""How a browser signs in to a run of the web view: a one-time code in a file of
the user's own, never on a command line or in an address.

``gitrelay web`` writes ``$GITRELAY_HOME/web/<run>/open.html``: the folder is the
user's only (0700), the file too (0600). The file is a form that posts the run's
current one-time code to the view's ``/login`` (submitted by the file's own
script, or by its button where scripts are off), so the browser is opened on the
file's path and the code travels only in a POST body. The view takes a code
once: it then answers with the session cookie, draws the next code and writes it
in the file (another browser, or the same one after a restart, opens the file
again). A code that was taken, or was never this run's, signs nothing in.
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import threading
from html import escape
from pathlib import Path

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="referrer" content="no-referrer">
<title>gitrelay web: signing in</title></head>
<body><form method="post" action="{action}">
<input type="hidden" name="code" value="{code}">
<p>Signing this browser in to the gitrelay web view at {base}.
<button type="submit">Sign in</button></p></form>
<script>document.forms[0].submit();</script></body></html>
"""


def new_secret() -> str:
    """A fresh random secret: 256 bits, URL-safe."""
    return secrets.token_urlsafe(32)


class SignIn:
    """The run's one-time code and the file that holds it."""

    def __init__(self, folder: Path, base: str) -> None:
        self.folder = folder
        self.base = base
        self._code = new_secret()
        self._lock = threading.Lock()

    @property
    def path(self) -> Path:
        return self.folder / "open.html"

    @property
    def url(self) -> str:
        """The file's address, for a browser's command line (it holds no secret)."""
        return self.path.resolve().as_uri()

    def write(self) -> Path:
        """Write the file with the current code: folder 0700, file 0600 from its first
        byte (created under a fresh name, then renamed over the last one)."""
        self.folder.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.folder.mkdir(mode=0o700, exist_ok=True)
        for folder in (self.folder.parent, self.folder):
            os.chmod(folder, 0o700)
        tmp = self.folder / f".open.{secrets.token_hex(4)}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(PAGE.format(action=escape(self.base + "/login"), code=escape(self._code),
                                  base=escape(self.base)))
        os.replace(tmp, self.path)
        return self.path

    def take(self, given: str) -> bool:
        """Whether ``given`` is the current code; if so it is dead from now on, and the
        file holds the next one."""
        with self._lock:
            if not given or not hmac.compare_digest(given.encode(), self._code.encode()):
                return False
            self._code = new_secret()
            self.write()
            return True

    def remove(self) -> None:
        """Take the file and its folder away (the run is over)."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        with contextlib.suppress(OSError):
            self.folder.rmdir()
