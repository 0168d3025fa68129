"""The relay format and its rules: standard library only, importable by the gate.

Nothing here imports from another gitrelay package, and nothing here imports
pygit2, pydantic or yaml: the pre-receive hook loads these modules on every push.
"""
