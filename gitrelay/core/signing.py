"""SSH signatures on operation commits (``ssh-keygen -Y``).

Signing happens on the client (the mirror signs every commit it builds when it
has a signer); verification in the gate, in the client's own pre-push check,
in verify-on-read and in ``gitrelay verify``. The signature is a ``gpgsig``
header in git's own format, so ``git verify-commit`` with ``gpg.format=ssh``
and an allowed-signers file (:func:`allowed_signers`) checks the same commits.

Standard library only: the gate imports this module when a relay requires
signatures.
"""

from __future__ import annotations

import base64
import binascii
import re
import subprocess
import tempfile
from pathlib import Path

from gitrelay.core.errors import ConfigError, NextStep

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping
    from typing import Any

    from gitrelay.core.objects import Commit

NAMESPACE = "git"
TIMEOUT = 30.0
# Key types ssh-keygen -Y can verify (plain keys; no certificates, no options).
KEY_TYPES = (
    "ssh-ed25519", "ssh-rsa", "ecdsa-sha2-nistp256", "ecdsa-sha2-nistp384",
    "ecdsa-sha2-nistp521", "sk-ssh-ed25519@openssh.com", "sk-ecdsa-sha2-nistp256@openssh.com",
)
_BASE64_RE = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")
_ARMOR_BEGIN = "-----BEGIN SSH SIGNATURE-----"
_ARMOR_END = "-----END SSH SIGNATURE-----"


def public_key(text: str) -> str | None:
    """``"<type> <base64>"`` of an OpenSSH public key line, or None when it is not one.

    Comments, options and anything after the key are dropped, so a registered
    key can never add a line or an option to an allowed-signers file.
    """
    parts = text.split()
    if len(parts) < 2 or parts[0] not in KEY_TYPES or not _BASE64_RE.match(parts[1]):
        return None
    try:
        blob = base64.b64decode(parts[1], validate=True)
    except (binascii.Error, ValueError):
        return None
    # The blob starts with the key type as an SSH string: the line does not lie about it.
    name = parts[0].encode()
    if blob[:4] != len(name).to_bytes(4, "big") or blob[4:4 + len(name)] != name:
        return None
    return f"{parts[0]} {parts[1]}"


def read_public_key(key_path: str) -> str:
    """The public key of the signing key at ``key_path`` (the key or its ``.pub``)."""
    pub = Path(key_path if key_path.endswith(".pub") else key_path + ".pub").expanduser()
    try:
        text = pub.read_text()
    except OSError as exc:
        raise ConfigError(f"cannot read the public key {pub}: {exc.strerror}",
                          next_step=NextStep.FIX_SIGNING_KEY, path=str(pub),
                          field="signing_key") from None
    key = public_key(text)
    if key is None:
        raise ConfigError(f"{pub} is not an OpenSSH public key "
                          f"(expected one of {', '.join(KEY_TYPES)})",
                          next_step=NextStep.FIX_SIGNING_KEY, path=str(pub),
                          field="signing_key")
    return key


def sign(payload: bytes, key_path: str) -> str:
    """An armored SSH signature of ``payload`` made with the private key at ``key_path``
    (or, for a ``.pub`` path, with the matching key held by ssh-agent)."""
    with tempfile.TemporaryDirectory(prefix="gitrelay-sign-") as tmp:
        data = Path(tmp) / "payload"
        data.write_bytes(payload)
        try:
            proc = subprocess.run(
                ["ssh-keygen", "-Y", "sign", "-q", "-n", NAMESPACE, "-f", key_path, str(data)],
                capture_output=True, stdin=subprocess.DEVNULL, check=False, timeout=TIMEOUT)
        except FileNotFoundError:
            raise ConfigError("ssh-keygen is not installed: it is needed to sign operations",
                              next_step=NextStep.INSTALL_OPENSSH) from None
        except subprocess.TimeoutExpired:
            raise ConfigError(f"signing with {key_path} did not finish within "
                              f"{TIMEOUT:.0f} s (a passphrase prompt?)",
                              next_step=NextStep.FIX_SIGNING_KEY,
                              field="signing_key") from None
        sig = Path(tmp) / "payload.sig"
        if proc.returncode != 0 or not sig.exists():
            raise ConfigError(f"signing with {key_path} failed: "
                              f"{proc.stderr.decode(errors='replace').strip()}",
                              next_step=NextStep.FIX_SIGNING_KEY, field="signing_key")
        return sig.read_text()


def verify_commit_signature(commit: Commit, actor: str, keys: list[str]) -> str | None:
    """None when ``commit`` carries a valid signature by one of ``keys``; else the problem."""
    if commit.signature is None:
        return "commit is not signed"
    signature = commit.signature.strip()
    if not (signature.startswith(_ARMOR_BEGIN) and signature.endswith(_ARMOR_END)):
        return "commit carries a signature that is not an SSH signature"
    usable = [k for k in (public_key(key) for key in keys) if k is not None]
    if not usable:
        return f"{actor} has no usable registered signing key"
    with tempfile.TemporaryDirectory(prefix="gitrelay-verify-") as tmp:
        signers = Path(tmp) / "allowed_signers"
        signers.write_text("".join(_signer_line(actor, k) for k in usable))
        sig = Path(tmp) / "sig"
        sig.write_text(signature + "\n")
        try:
            proc = subprocess.run(["ssh-keygen", "-Y", "verify", "-f", str(signers), "-I", actor,
                                   "-n", NAMESPACE, "-s", str(sig)],
                                  input=commit.signed_payload, capture_output=True, check=False,
                                  timeout=TIMEOUT)
        except FileNotFoundError:
            return "ssh-keygen is not installed where the signature is checked"
        except subprocess.TimeoutExpired:
            return f"ssh-keygen did not verify the signature within {TIMEOUT:.0f} s"
    if proc.returncode != 0:
        return f"signature does not verify against {actor}'s registered key(s)"
    return None


def _signer_line(principal: str, key: str) -> str:
    # Handles match [A-Za-z0-9._-]+@[A-Za-z0-9._-]+: no quote, comma or pattern character.
    return f'"{principal}" namespaces="{NAMESPACE}" {key}\n'


def allowed_signers(profiles: Iterable[Mapping[str, Any]]) -> str:
    """An allowed-signers file for ``git verify-commit`` (``gpg.format=ssh``,
    ``gpg.ssh.allowedSignersFile``) holding every registered key of ``profiles``."""
    lines = []
    for profile in profiles:
        for key in profile.get("signing_keys", []):
            usable = public_key(str(key))
            if usable is not None:
                lines.append(_signer_line(str(profile["handle"]), usable))
    return "".join(lines)


def signer_for(key_path: str) -> Callable[[bytes], str]:
    """A signer for mirror commits using the key at ``key_path``."""
    path = str(Path(key_path).expanduser())

    def signer(payload: bytes) -> str:
        return sign(payload, path)

    return signer
