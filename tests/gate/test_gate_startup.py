"""The gate starts light, and never holds an oversized file in memory.

Start-up is most of what a push pays for the gate, so what it imports is
checked structurally (never by timing): a fresh ``python -I -S`` imports the
gate, or runs it on every kind of operation, without the modules that make
start-up slow. A file over the relay's size limit is refused from the size in
``git cat-file``'s header and skipped as git sends it.
"""

from __future__ import annotations

import subprocess
import sys
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gitrelay.core import layout, schema
from gitrelay.core.gitcli import SKIP_CHUNK, CatFile
from gitrelay.core.objects import ZERO_OID, Objects, UnreadBlob
from gitrelay.core.pushcheck import check_updates
from gitrelay.core.schema import SchemaError
from tests.kit import ALICE, BOB, MAIN, Bench, git_env, message_doc, standard_bench

ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_MAX = schema.DEFAULT_LIMITS["max_file_bytes"]
# What the gate's import must leave out (each costs start-up); the run below also leaves out
# what only a refusal or a writer needs. ``os`` is allowed: it is the portable face of
# posix/nt (the environment, git's pipes, the final _exit), and once the gate's own modules
# are in it adds only stat and posixpath. ``collections`` (which ``collections.abc`` imports
# whole) and ``types`` cost about 3 ms of CPU per push together.
HEAVY = {"re", "enum", "typing", "dataclasses", "subprocess", "pathlib", "collections",
         "types"}
NOT_ON_THE_COMMON_PATH = HEAVY | {"json", "hashlib", "_hashlib", "gitrelay.core.signing"}


def run_python(code: str, *, stdin: str = "", env: dict[str, str] | None = None
               ) -> subprocess.CompletedProcess[str]:
    """``code`` in a fresh interpreter started as the installed hook starts it."""
    return subprocess.run([sys.executable, "-I", "-S", "-c", code], input=stdin, text=True,
                          capture_output=True, env=env, timeout=60, check=False)


PRELUDE = f"import sys\nsys.path.insert(0, {str(ROOT)!r})\nbefore = set(sys.modules)\n"
REPORT = "print(' '.join(sorted(set(sys.modules) - before)))\n"


def test_importing_the_gate_loads_none_of_the_slow_modules() -> None:
    proc = run_python(PRELUDE + "import gitrelay.gate.gate\n" + REPORT)
    assert proc.returncode == 0, proc.stderr
    loaded = set(proc.stdout.split())
    assert {"gitrelay.gate.gate", "gitrelay.core.rules", "gitrelay.core.schema"} <= loaded
    assert not HEAVY & loaded, sorted(HEAVY & loaded)


def test_the_installed_hook_starts_the_interpreter_isolated_and_without_site() -> None:
    from gitrelay.relay.joining import hook_script

    first = hook_script("/usr/bin/python3").splitlines()[0]
    assert first == "#!/usr/bin/python3 -IS"


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Bench:
    return standard_bench(tmp_path_factory.mktemp("startup") / "standard")


@pytest.fixture
def bench(template: Bench, tmp_path: Path) -> Bench:
    return template.copy(tmp_path / "relay")


def test_checking_every_kind_of_operation_loads_none_of_them_either(bench: Bench) -> None:
    # The whole standard history from its root: init, register, handoff, message,
    # accept, complete, cancel on main, and alice's inbox ref.
    updates = (f"{ZERO_OID} {bench.tip} {MAIN}\n"
               f"{ZERO_OID} {bench.inbox[ALICE]} {layout.inbox_ref(ALICE)}\n")
    code = PRELUDE + ("from gitrelay.gate.gate import main\nstatus = main()\n" + REPORT
                      + "sys.exit(status)\n")
    proc = run_python(code, stdin=updates, env=git_env({"GIT_DIR": str(bench.relay)}))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    loaded = set(proc.stdout.split())
    assert "gitrelay.core.rules" in loaded
    assert loaded & {"_sha256", "_sha2"}, "handoffs were checked without deriving thread ids"
    assert not NOT_ON_THE_COMMON_PATH & loaded, sorted(NOT_ON_THE_COMMON_PATH & loaded)


def test_the_gate_refusing_a_push_still_names_the_rule(bench: Bench) -> None:
    # A refusal may import what it needs to word the problem; it must still be right.
    tid = bench.threads["pending"]
    data = schema.dumps(message_doc(tid, 3, BOB)).replace(b'"body"', b'"body": 1, "body"', 1)
    bench.build("message", message_doc(tid, 3, BOB), data=data)
    result = bench.push_main()
    assert result.rules == ["json"], result.stderr
    assert 'duplicate key "body"' in result.stderr


# --- oversized files ------------------------------------------------------------------------


def message_of_size(bench: Bench, size: int) -> dict[str, Any]:
    doc = message_doc(bench.threads["pending"], 3, BOB, payload={"log": ""})
    doc["payload"]["log"] = "x" * (size - len(schema.dumps(doc)))
    assert len(schema.dumps(doc)) == size
    return doc


def test_an_oversized_file_is_refused_by_its_size_and_nothing_is_written(bench: Bench) -> None:
    size = 6 * 1024 * 1024
    bench.build("message", message_of_size(bench, size))
    before = bench.relay_refs()
    result = bench.push_main()
    assert result.rules == ["size"], result.stderr
    assert f"file is {size} bytes, over the limit of {DEFAULT_MAX}" in result.stderr
    assert bench.relay_refs() == before
    assert not bench.relay_has(bench.tip)


def peak_bytes_while(action: Any) -> tuple[Any, int]:
    tracemalloc.start()
    try:
        result = action()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_gate_never_holds_an_oversized_file_in_memory(bench: Bench) -> None:
    size = 16 * 1024 * 1024
    old = bench.tip
    bench.build("message", message_of_size(bench, size))
    entry = bench.objects.entry(bench.commit(bench.tip).tree,
                                layout.message_path(bench.threads["pending"], 3))
    assert entry is not None
    with CatFile(bench.work, env=git_env()) as source:
        refusals, peak = peak_bytes_while(
            lambda: check_updates(Objects(source), [(old, bench.tip, MAIN)], {}))
        # The contrast that shows the measurement can see it: reading the file whole.
        found, whole_peak = peak_bytes_while(lambda: source.read(entry.oid))
    assert [r.rule for r in refusals] == ["size"]
    assert f"file is {size} bytes, over the limit of {DEFAULT_MAX}" in refusals[0].message
    assert found is not None and len(found[1]) == size
    assert whole_peak >= size
    assert peak < size // 8, f"the check peaked at {peak} bytes for a {size}-byte file"


@pytest.fixture(scope="module", params=[1_000, 600_000], ids=["small-limit", "large-limit"])
def limited(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
            ) -> Iterator[tuple[Bench, int]]:
    limit = int(request.param)
    limits = dict(schema.DEFAULT_LIMITS, max_file_bytes=limit)
    yield standard_bench(tmp_path_factory.mktemp(f"limit-{limit}") / "relay",
                         config={"limits": limits}), limit


@pytest.mark.parametrize("over", [0, 1, "far"])
def test_the_relays_own_limit_decides_what_is_read_and_refused(
        limited: tuple[Bench, int], over: int | str, tmp_path: Path) -> None:
    """A limit above the default still lets files up to it through (the gate must read
    them); below it, the default does not let a larger file through unchecked."""
    template, limit = limited
    bench = template.copy(tmp_path / "relay")
    size = 3 * max(limit, DEFAULT_MAX) if over == "far" else limit + int(over)
    bench.build("message", message_of_size(bench, size))
    result = bench.push_main()
    if over == 0:
        assert result.accepted, result.stderr
    else:
        assert result.rules == ["size"], result.stderr
        assert f"file is {size} bytes, over the limit of {limit}" in result.stderr


def test_cat_file_skips_an_object_over_the_limit_and_stays_in_step(bench: Bench) -> None:
    big_data = bytes(range(256)) * (3 * SKIP_CHUNK // 256) + b"tail"
    big, small = bench.forge.blob(big_data), bench.forge.blob(b"small\n")
    tree = bench.commit(bench.tip).tree
    with CatFile(bench.work, env=git_env()) as source:
        assert source.read_within(big, 1000) == ("blob", None, len(big_data))
        assert source.read(small) == ("blob", b"small\n")
        assert source.read_within(big, len(big_data)) == ("blob", big_data, len(big_data))
        assert source.read_within("0" * 40, 10) is None
        kind, data, _ = source.read_within(tree, 1) or ("", b"", 0)
        assert (kind, data) == ("tree", None)
        objs = Objects(source, max_blob=1000)
        unread = objs.blob(big)
        assert isinstance(unread, UnreadBlob) and len(unread) == len(big_data)
        assert objs.blob(small) == b"small\n"
        with pytest.raises(ValueError, match="is a tree, not a blob"):
            objs.blob(tree)
        assert source.read(small) == ("blob", b"small\n")


def test_an_unread_blob_is_refused_by_size_and_never_passes_for_content() -> None:
    unread = UnreadBlob("ab" * 20, 5000)
    with pytest.raises(SchemaError, match="file is 5000 bytes, over the limit of 4096"):
        schema.parse_json(unread, max_bytes=4096, max_depth=16)
    with pytest.raises(ValueError, match="over the size limit and was not read"):
        schema.parse_json(unread, max_bytes=10_000, max_depth=16)


def test_without_a_limit_objects_reads_blobs_whole(bench: Bench) -> None:
    data = b"x" * (DEFAULT_MAX + 10)
    oid = bench.forge.blob(data)
    with CatFile(bench.work, env=git_env()) as source:
        assert Objects(source).blob(oid) == data
