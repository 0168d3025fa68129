"""The gate under the name that hooks installed before it moved to :mod:`gitrelay.gate`
import (``from gitrelay.hook.gate import run``): a relay whose hook was written then keeps
accepting valid pushes after an upgrade. ``gitrelay doctor`` on the server tells its admin
to reinstall such a hook before :data:`REMOVED_IN`, the version that drops this module;
nothing else imports it."""

from gitrelay.gate.gate import main, run

# The gitrelay version without this alias (docs/deploying.md, "Installing the gate"); a
# test fails once the package reaches it with the alias still here.
REMOVED_IN = "0.2.0"

__all__ = ["REMOVED_IN", "main", "run"]
