"""The gate under the name that hooks installed before it moved to :mod:`gitrelay.gate`
import (``from gitrelay.hook.gate import run``): a relay whose hook was written then keeps
accepting valid pushes after an upgrade. ``gitrelay doctor`` still suggests reinstalling
such a hook; nothing else imports this module."""

from gitrelay.gate.gate import main, run

__all__ = ["main", "run"]
