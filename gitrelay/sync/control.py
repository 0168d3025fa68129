"""One user's local copy of a relay, kept in step with it: what a client runs.

:class:`SyncControl` opens the copy (a damaged one is set aside, fetched again
and its outbox queued again: :func:`rebuild`), fetches when the copy is older
than ``fresh_seconds`` (:meth:`~SyncControl.refresh`), delivers what is queued,
and starts and stops the background :class:`~gitrelay.sync.loop.SyncLoop`. The
handoff operations (:class:`gitrelay.relay.client.RelayClient`) read and write
through it and never drive the sync themselves.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path

from gitrelay.core.errors import RelayError, RelayUnavailable
from gitrelay.core.ops import Op, now_iso
from gitrelay.store.config import mirror_path
from gitrelay.store.mirror import Mirror
from gitrelay.store.recovery import mirror_problem, salvage_outbox, set_aside
from gitrelay.sync.inboxstate import merge_inbox_states
from gitrelay.sync.loop import FRESH_WHILE_RUNNING, SyncLoop
from gitrelay.sync.push import Syncer, SyncReport, probe
from gitrelay.sync.seat import Seat, ask_for_pass

log = logging.getLogger(__name__)

FRESH_SECONDS = 2.0
# How long a read waits for the machine's sync loop to look at the relay for it before
# fetching itself.
ASK_SECONDS = 5.0


class SyncControl:
    """The local copy of ``relay_url`` for ``handle``: its mirror, its syncer, and
    the one sync loop of this process that may run on them."""

    def __init__(self, relay_url: str, handle: str, *,
                 signer: Callable[[bytes], str] | None = None,
                 fresh_seconds: float = FRESH_SECONDS,
                 env: dict[str, str] | None = None) -> None:
        self.relay_url = relay_url
        self.fresh_seconds = fresh_seconds
        path = mirror_path(relay_url)
        if not path.exists():
            probe(relay_url, env)  # an unreachable relay leaves no empty mirror behind
        problem = mirror_problem(path)
        salvaged = salvage_outbox(path) if problem else []
        damaged = set_aside(path) if problem else None
        self.mirror = Mirror(path, handle, signer=signer)
        self.syncer = Syncer(self.mirror, relay_url, env=env,
                             inbox_merger=merge_inbox_states)
        # Why the last fetch or delivery could not reach the relay, if it could not.
        self.last_error: RelayError | None = None
        # The running SyncLoop of this process, if any (start_loop): waited writes
        # hand their delivery to it, long-polls wake on its fetches.
        self.loop: SyncLoop | None = None
        if problem:
            rebuild(self.mirror, self.syncer, problem, damaged, salvaged)

    # --- fetching ------------------------------------------------------------------

    def needs_fetch(self, *, max_age: float | None = None) -> bool:
        """True when the local copy is missing or older than ``max_age`` seconds
        (default ``fresh_seconds``): :meth:`refresh` would fetch."""
        limit = self.fresh_seconds if max_age is None else max_age
        return self.mirror.main() is None or self.mirror.last_fetch_age() >= limit

    def refresh(self, *, max_age: float | None = None) -> None:
        """Fetch when the local copy is older than ``max_age`` seconds."""
        if not self.needs_fetch(max_age=max_age):
            return
        if self.mirror.main() is not None and self._pass_by_the_machines_loop():
            return
        try:
            self.syncer.fetch()
            self.last_error = None
        except RelayUnavailable as exc:
            self.last_error = exc
            if self.mirror.main() is None:
                raise

    def _pass_by_the_machines_loop(self) -> bool:
        """Have the machine's sync loop look at the relay for this process, when one
        runs (here or in another process): one look for every process of the user."""
        if self.loop is not None and self.loop.running:
            done = self.loop.deliver_pass(ASK_SECONDS)
        else:
            done = ask_for_pass(Seat(self.mirror.path), ASK_SECONDS)
        return done and not self.needs_fetch(max_age=ASK_SECONDS)

    def problem(self) -> str | None:
        """What verify-on-read refused at the last fetch, or None when all was valid.

        The text names the first commit that breaks a rule, the rule, and the
        last valid commit: reads show the relay up to that commit and nothing
        after it until the relay is repaired (docs/identity.md).
        """
        problem = self.mirror.sync_state().get("verify_problem")
        return str(problem) if problem else None

    # --- delivering ----------------------------------------------------------------

    def deliver(self, *, timeout: float | None = None) -> SyncReport:
        """Deliver the outbox now, within ``timeout`` seconds when given."""
        deadline = time.monotonic() + timeout if timeout is not None else None
        return self.syncer.deliver(deadline=deadline)

    # --- the background loop ---------------------------------------------------------

    def start_loop(self, *, watch: bool = True) -> SyncLoop:
        """Start this copy's background sync loop (one per process); writes kick it.

        While it runs, reads use the local copy when its last fetch is
        ``FRESH_WHILE_RUNNING`` seconds fresh: the loop keeps it current.
        """
        if self.loop is None:
            self.loop = SyncLoop(self.mirror, self.syncer, self.relay_url, watch=watch)
            self.fresh_seconds = FRESH_WHILE_RUNNING
            self.loop.start()
        return self.loop

    def stop_loop(self, *, flush: bool = True, timeout: float = 10.0) -> None:
        """Stop the loop; with ``flush``, try once more to deliver what is queued."""
        loop, self.loop = self.loop, None
        if loop is not None:
            loop.stop(flush=flush, timeout=timeout)

    def kick(self) -> None:
        """Ask the running sync loop for a pass now (nothing without a loop)."""
        if self.loop is not None:
            self.loop.kick()


def rebuild(mirror: Mirror, syncer: Syncer, problem: str, damaged: Path | None,
            salvaged: list[Op]) -> None:
    """Fetch a damaged mirror again and queue what could be saved of its outbox."""
    syncer.fetch()
    requeued = 0
    for op in salvaged:
        try:
            if not op.already_applied(mirror.view()):
                mirror.append(op)
                requeued += 1
        except RelayError as exc:
            mirror.record_refused(op, exc, rule=str(exc.data.get("rule", exc.name)))
    mirror.update_sync_state(repaired={"at": now_iso(), "problem": problem,
                                       "moved_to": str(damaged), "requeued": requeued})
    log.warning("gitrelay: the local copy was damaged (%s); fetched it again from the "
                "relay, re-queued %d operation(s); the old copy is in %s",
                problem, requeued, damaged)
