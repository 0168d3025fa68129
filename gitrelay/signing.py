"""SSH signatures on operation commits (``ssh-keygen -Y``).

Signing happens on the client; verification in the gate, in verify-on-read and
in ``gitrelay verify``. Standard library only.
"""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

from .errors import ConfigError
from .objects import Commit

NAMESPACE = "git"


def sign(payload: bytes, key_path: str) -> str:
    """An armored SSH signature of ``payload`` made with the private key at ``key_path``
    (or, for a ``.pub`` path, with the matching key held by ssh-agent)."""
    with tempfile.TemporaryDirectory(prefix="gitrelay-sign-") as tmp:
        data = Path(tmp) / "payload"
        data.write_bytes(payload)
        proc = subprocess.run(["ssh-keygen", "-Y", "sign", "-q", "-n", NAMESPACE, "-f", key_path,
                               str(data)], capture_output=True, check=False, timeout=30)
        sig = Path(tmp) / "payload.sig"
        if proc.returncode != 0 or not sig.exists():
            raise ConfigError(f"signing with {key_path} failed: "
                              f"{proc.stderr.decode(errors='replace').strip()}",
                              hint="Check signing_key in your gitrelay config.")
        return sig.read_text()


def verify_commit_signature(commit: Commit, actor: str, keys: list[str]) -> str | None:
    """None when ``commit`` carries a valid signature by one of ``keys``; else the problem."""
    if commit.signature is None:
        return "commit is not signed"
    with tempfile.TemporaryDirectory(prefix="gitrelay-verify-") as tmp:
        signers = Path(tmp) / "allowed_signers"
        signers.write_text("".join(f'"{actor}" namespaces="{NAMESPACE}" {k}\n' for k in keys))
        sig = Path(tmp) / "sig"
        sig.write_text(commit.signature + "\n")
        proc = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(signers), "-I", actor,
                               "-n", NAMESPACE, "-s", str(sig)], input=commit.signed_payload,
                              capture_output=True, check=False, timeout=30)
    if proc.returncode != 0:
        return f"signature does not verify against {actor}'s registered key(s)"
    return None


def signer_for(key_path: str) -> Callable[[bytes], str]:
    """A signer for mirror commits using the key at ``key_path``."""
    path = str(Path(key_path).expanduser())

    def signer(payload: bytes) -> str:
        return sign(payload, path)

    return signer
