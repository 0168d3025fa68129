"""The test kit: every helper the tests share, each once. Import it from here::

    from tests.kit import ALICE, Bench, git, read_answer, wait_until

Each concern is a module of its own, and this front door offers the names each one
lists in its ``__all__`` (no two of them offer the same name):

- :mod:`~tests.kit.hermetic`: the hermetic environment every test runs in
  (``hermetic_env`` for a child process, ``set_hermetic`` for the test's own), and a
  trust file that is there but cannot be read (``make_unreadable``);
- :mod:`~tests.kit.gitrun`: git run in that environment (``git``, ``git_out``,
  ``ref_of``, ``push``: pushes go through the git command line, so the relay's hooks run);
- :mod:`~tests.kit.waiting`: ``wait_until`` and ``await_until``, for what another
  process or thread does;
- :mod:`~tests.kit.documents`: the teammates (``ALICE``, ``BOB``...) and the relay's
  documents and commit messages (``handoff_doc``, ``message_op``...);
- :mod:`~tests.kit.forging`: commits built by hand, as an impostor would (``forge``,
  ``Forge``), and signing keys;
- :mod:`~tests.kit.relays`: relay histories built object by object and pushed through
  the gate (``Bench``, ``standard_bench``, the declarative bad pushes);
- :mod:`~tests.kit.hookless`: a relay without the gate, with a genuine handoff on it;
- :mod:`~tests.kit.answers`: an MCP answer read as the agent reads it (its fence);
- :mod:`~tests.kit.mcp`: the MCP tests' sample artifacts, trust and inbox pages;
- :mod:`~tests.kit.payloads`: the prompt-injection corpus;
- :mod:`~tests.kit.web`: a real ``gitrelay web`` asked over HTTP, and another local user;
- :mod:`~tests.kit.hosts`: real coding hosts run headless against a scripted model.

The relay fixtures (``relay``, ``relays``, ``make_client``, ``team``, ``people``) are in
``tests/conftest.py``; the real git servers are in ``tests/servers/``.
"""

from tests.kit.answers import *  # noqa: F403
from tests.kit.documents import *  # noqa: F403
from tests.kit.forging import *  # noqa: F403
from tests.kit.gitrun import *  # noqa: F403
from tests.kit.hermetic import *  # noqa: F403
from tests.kit.hookless import *  # noqa: F403
from tests.kit.hosts import *  # noqa: F403
from tests.kit.mcp import *  # noqa: F403
from tests.kit.payloads import *  # noqa: F403
from tests.kit.relays import *  # noqa: F403
from tests.kit.waiting import *  # noqa: F403
from tests.kit.web import *  # noqa: F403
