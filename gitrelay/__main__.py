import sys

from gitrelay.cli.main import main

sys.exit(main())
