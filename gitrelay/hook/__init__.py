"""The gate's former package name, kept for hooks installed before it became
:mod:`gitrelay.gate` (see :mod:`gitrelay.hook.gate`)."""
