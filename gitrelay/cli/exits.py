"""The command's exit codes (a module of its own: ``gitrelay hook`` reads them without
loading the rest of the command line)."""

EXIT_OK = 0            # success
EXIT_ERROR = 1         # the operation was refused or failed (the line says which rule)
EXIT_USAGE = 2         # the command line itself is wrong
EXIT_INVALID = 3       # a check found problems (`verify`, `doctor`)
EXIT_UNAVAILABLE = 4   # the relay could not be reached and there is no local copy to use
EXIT_INTERNAL = 70     # a bug in gitrelay (please report it with GITRELAY_DEBUG=1 output)
EXIT_INTERRUPTED = 130
