"""The pre-receive gate: the entry point a relay's hook runs on every push."""
