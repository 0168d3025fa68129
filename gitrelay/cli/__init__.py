"""The `gitrelay` command line: the parser and one module per group of commands."""
