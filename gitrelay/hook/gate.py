"""The gate under the name that hooks installed before it moved to :mod:`gitrelay.gate`
import (``from gitrelay.hook.gate import run``): a relay whose hook was written then keeps
accepting valid pushes after an upgrade, until the version
:data:`gitrelay.core.vocab.GATE_ALIAS_REMOVED_IN` drops this module (``gitrelay doctor`` on
the server tells its admin to reinstall such a hook before then); nothing else imports it."""

from gitrelay.gate.gate import main, run

__all__ = ["main", "run"]
