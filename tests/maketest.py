"""``make test``: lint, type check, every test, the quick benchmark, then one verdict line.

The tests run in two processes per core (at most four, through pytest-xdist, each
module on one process), their temporary files in a RAM-backed folder where there is
one; the quick benchmark runs beside the other steps, and its output is shown when it
ends.
Each other step's output streams as it runs; the last line says how it all went::

    make test: 1270 passed, 0 failed, 3 skipped in 312 s

with "(lint failed)", "(type check failed)" or "(quick benchmark failed)" added
when a step other than the tests failed. When the real-host tests were skipped
because Claude Code and Codex are not installed in ``.hosts/``, it says how many
and the one command that runs them::

    make test: 1616 passed, 0 failed, 21 skipped in 312 s (21 real-host tests skipped:
    the hosts are not installed; `.ci/install-node.sh && make test` runs them)

The exit status is 0 only when every
step passed. ``--pytest-args`` and ``--skip`` choose what runs (for trying the
runner itself on a few tests).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
STEPS = ("lint", "typecheck", "tests", "bench")
REAL_HOSTS_SKIPPED = "real-host test skipped"
"""How a real-host test's skip reason begins (tests/kit/hosts.py's ``need_host``)."""
RUN_REAL_HOSTS = ".ci/install-node.sh && make test"
# Two test processes per core, at most four: most tests wait on git, servers and hosts
# (on 2 cores, four processes ran the suite in 528 s, two in about 560 s). Each module
# runs on one process (loadscope): a module's fixture (a real-host round trip, about
# 35 s of two coding hosts' work) then runs once, where stealing tests between processes
# had it run again on each process that took some of its tests (seven times, once).
WORKERS = min(4, 2 * (os.cpu_count() or 1))
PYTEST_ARGS = f"--durations=10 --numprocesses={WORKERS} --dist=loadscope"
# The tests' temporary files go to a RAM-backed folder when the system has one with this
# much room (Linux's /dev/shm): the suite creates hundreds of thousands of files (relays,
# homes, servers' folders), and on a busy disk creating a file costs far more CPU.
SCRATCH = Path("/dev/shm")
SCRATCH_ROOM = 4 * 2**30
WHAT_FAILED = {"lint": "lint failed", "typecheck": "type check failed",
               "tests": "the tests did not run to the end", "bench": "quick benchmark failed"}


@dataclass
class Counts:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    hosts_skipped: int = 0   # of the skipped, the real-host tests (no hosts in .hosts/)


def _run(title: str, argv: list[str], env: dict[str, str] | None = None) -> int:
    print(f"== {title}", flush=True)
    return subprocess.run(argv, cwd=ROOT, check=False, env=env).returncode


class _Background:
    """A step run beside the others, its output kept in a file and shown when it ends."""

    def __init__(self, title: str, argv: list[str], log: Path) -> None:
        self.title, self.log = title, log
        self._out = log.open("wb")
        self._proc = subprocess.Popen(argv, cwd=ROOT, stdout=self._out,
                                      stderr=subprocess.STDOUT)

    def finish(self) -> int:
        """Wait for the step, print its output under its title; its exit status."""
        code = self._proc.wait()
        self._out.close()
        print(f"== {self.title}", flush=True)
        sys.stdout.write(self.log.read_text(encoding="utf-8", errors="replace"))
        sys.stdout.flush()
        return code


def _counts(junit: Path) -> Counts | None:
    """The totals of a pytest run's JUnit XML, or None when it wrote none."""
    try:
        root = ET.parse(junit).getroot()
    except (OSError, ET.ParseError):
        return None
    suites = [root] if root.tag == "testsuite" else list(root.iter("testsuite"))
    total = Counts()
    for suite in suites:
        tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        total.passed += tests - skipped - failed
        total.failed += failed
        total.skipped += skipped
    total.hosts_skipped = sum(
        1 for case in root.iter("testcase") for skip in case.findall("skipped")
        if skip.get("message", "").startswith(REAL_HOSTS_SKIPPED))
    return total


def verdict(counts: Counts | None, seconds: float, failed_steps: list[str]) -> str:
    tests = ("no test results" if counts is None else
             f"{counts.passed} passed, {counts.failed} failed, {counts.skipped} skipped")
    notes = [WHAT_FAILED[s] for s in failed_steps]
    if counts is not None and counts.hosts_skipped:
        notes.append(f"{counts.hosts_skipped} real-host tests skipped: the hosts are not "
                     f"installed; `{RUN_REAL_HOSTS}` runs them")
    extra = f" ({'; '.join(notes)})" if notes else ""
    return f"make test: {tests} in {seconds:.0f} s{extra}"


def scratch_folder() -> Path | None:
    """Where the tests' temporary files go: :data:`SCRATCH` when it has the room and may be
    written, else None (the system's temporary folder)."""
    try:
        room = shutil.disk_usage(SCRATCH).free
    except OSError:
        return None
    return SCRATCH if room >= SCRATCH_ROOM and os.access(SCRATCH, os.W_OK) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.maketest", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pytest-args", default=PYTEST_ARGS,
                        help="arguments for pytest (default: %(default)s)")
    parser.add_argument("--skip", action="append", choices=STEPS, default=[],
                        help="leave a step out (repeatable)")
    args = parser.parse_args(argv)
    py = sys.executable
    bindir = Path(py).parent
    started = time.monotonic()
    failed: list[str] = []
    counts: Counts | None = None
    with tempfile.TemporaryDirectory(prefix="gitrelay-maketest-") as tmp:
        # The quick benchmark runs beside the other steps: most of its time is spent
        # waiting (idle sessions, a team's quiet minute), and its figures are not judged
        # here; its output is shown when it ends.
        bench = None if "bench" in args.skip else _Background(
            "benchmark: python -m bench --quick (checks the suite runs; `make bench` "
            "measures; run beside the tests, so its figures mean less still)",
            [py, "-m", "bench", "--quick", "--out", "bench/results/quick.json"],
            Path(tmp) / "bench.log")
        if "lint" not in args.skip and _run("lint: ruff", [str(bindir / "ruff"), "check",
                                                            "gitrelay", "tests", "bench"]):
            failed.append("lint")
        if "typecheck" not in args.skip and _run("type check: mypy --strict",
                                                 [str(bindir / "mypy")]):
            failed.append("typecheck")
        if "tests" not in args.skip:
            junit = Path(tmp) / "junit.xml"
            with tempfile.TemporaryDirectory(prefix="gr-", dir=scratch_folder()) as scratch:
                # The tests' /tmp: open to every user as /tmp is (a test acts as another
                # user of the machine), pytest's own folder inside it.
                Path(scratch).chmod(0o1777)
                code = _run("tests: every test file, real git servers included where "
                            "installed",
                            [py, "-m", "pytest", *shlex.split(args.pytest_args),
                             f"--basetemp={scratch}/pytest", f"--junitxml={junit}",
                             "-o", "junit_family=legacy"],
                            env={**os.environ, "TMPDIR": scratch})
            counts = _counts(junit)
            if counts is None or (code != 0 and counts.failed == 0):
                failed.append("tests")
        if bench is not None and bench.finish():
            failed.append("bench")
    print()
    print(verdict(counts, time.monotonic() - started, failed), flush=True)
    return 1 if failed or (counts is not None and counts.failed) else 0


if __name__ == "__main__":
    sys.exit(main())
