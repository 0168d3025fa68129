"""The user's side: the home directory, the user config and where mirrors live.

``$GITRELAY_HOME`` (default ``~/.gitrelay``) holds ``config.json`` (written by
``gitrelay join``), one mirror per relay under ``mirrors/``, and the embedded
default relay ``local-relay.git`` used when nothing is configured.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gitrelay.core.errors import ConfigError, NextStep
from gitrelay.core.ids import check_handle
from gitrelay.core.vocab import DELIVERY_MODES

CONFIG_VERSION = 1
WRITE_MODES = DELIVERY_MODES


def home() -> Path:
    return Path(os.environ.get("GITRELAY_HOME") or Path.home() / ".gitrelay").expanduser()


def default_relay_path() -> Path:
    return home() / "local-relay.git"


def mirror_path(relay_url: str) -> Path:
    slug = re.sub(r"[^A-Za-z0-9]+", "-", relay_url.rstrip("/").rsplit("/", 1)[-1])[:40].strip("-")
    digest = hashlib.sha256(relay_url.encode()).hexdigest()[:12]
    return home() / "mirrors" / f"{slug or 'relay'}-{digest}.git"


@dataclass
class UserConfig:
    relay: str
    handle: str
    name: str = ""
    role: str = ""
    email: str | None = None
    signing_key: str | None = None
    writes: str = "queue"
    format_version: int = CONFIG_VERSION

    @property
    def mirror(self) -> Path:
        return mirror_path(self.relay)


def config_path() -> Path:
    return home() / "config.json"


def load_user_config() -> UserConfig | None:
    path = config_path()
    try:
        raw: Any = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid JSON: {exc}",
                          next_step=NextStep.FIX_CONFIG, path=str(path)) from None
    if not isinstance(raw, dict) or raw.get("format_version") != CONFIG_VERSION:
        raise ConfigError(f"{path} has format_version {raw.get('format_version')!r}; this "
                          f"gitrelay reads version {CONFIG_VERSION}",
                          next_step=NextStep.FIX_CONFIG, path=str(path),
                          field="format_version")
    try:
        cfg = UserConfig(**raw)
    except TypeError as exc:
        raise ConfigError(f"{path}: {exc}", next_step=NextStep.FIX_CONFIG,
                          path=str(path)) from None
    check_handle(cfg.handle)
    if cfg.writes not in WRITE_MODES:
        raise ConfigError(f"{path}: writes must be one of {', '.join(WRITE_MODES)}",
                          next_step=NextStep.FIX_CONFIG, path=str(path), field="writes")
    return cfg


def save_user_config(cfg: UserConfig) -> Path:
    path = config_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(asdict(cfg), indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)
    return path
