"""The coding hosts' side (Claude Code, Codex, Cursor): their settings files and how they
are written, the answers to their hooks, the session a host runs and the guard on its tool calls."""
