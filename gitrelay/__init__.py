"""gitrelay: hand work between teammates' coding agents through a private Git repository.

This package's ``__init__`` imports nothing: the pre-receive gate imports
``gitrelay.gate.gate`` and must start fast.
"""

__version__ = "0.1.0"
