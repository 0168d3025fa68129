"""``gitrelay web``: a local, read-mostly web view of the relay for people (docs/web.md)."""
