"""The local copy of a relay: the bare store, its journal and locks, the mirror, config."""
