"""`gitrelay demo` end to end: real `gitrelay mcp` processes, a real relay, a short story on
standard output and the full transcript in a file; and the demo from a plain (non-editable)
install of the wheel, where no source tree is around."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # the demo end to end, from a wheel built for it

ROOT = Path(__file__).resolve().parent.parent.parent


def section(story: str, number: int) -> str:
    start = story.index(f"\n{number}. ")
    end = story.find(f"\n{number + 1}. ", start)
    if end == -1:
        end = story.index("\nWhat just happened", start)
    return story[start:end]


def demo_processes(root: str) -> list[str]:
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if root in cmdline:
            found.append(f"{pid}: {cmdline}")
    return found


def check_story(out: str) -> tuple[str, Path]:
    """Assert the story reads as one; (the demo's temporary root, the transcript file)."""
    assert "Traceback" not in out
    lines = out.splitlines()
    assert len(lines) <= 80, f"{len(lines)} lines"
    # A line naming a temporary folder is as long as that folder's path.
    temp = (tempfile.gettempdir(), "/tmp")
    assert max(len(ln) for ln in lines
               if not any(t in ln for t in temp) and "GITRELAY_HOME" not in ln) <= 112
    root = re.search(r"relay: (/\S+?)/relay-host/local-relay\.git", out)
    assert root, out[:500]

    handoff = section(out, 1)
    assert re.search(r"alice +handoff_to_teammate → thread \w{6} for bob@acme, pending", handoff)
    finds = section(out, 2)
    assert re.search(r"bob +check_inbox → 1 new on \w{6} from alice@acme: assignment", finds)
    assert re.search(r"bob +accept_handoff → accepted; trust file: listed, auto_test yes", finds)
    # The one fenced answer, shown once: opened and closed with the same token.
    fences = re.findall(r"<<<teammate-data fence=([0-9a-f]{16})", out)
    assert len(fences) == 1
    assert f"<<<end teammate-data fence={fences[0]}>>>" in finds
    assert 'summary "GET /users is now paginated' in finds
    asks = section(out, 3)
    assert re.search(r"bob +send_message → message #1", asks)
    assert re.search(r"alice +check_inbox → 2 new on \w{6} from bob@acme: task update "
                     r"\(accepted\), reply", asks)
    assert re.search(r"bob +check_inbox → 1 new on \w{6} from alice@acme: reply", asks)
    done = section(out, 4)
    assert re.search(r"bob +complete_handoff → completed", done)
    assert re.search(r"alice +check_inbox → 1 new on \w{6} from bob@acme: task update "
                     r"\(completed\)", done)
    blocked = section(out, 5)
    assert "carol$ gitrelay send bob@acme --intent inform" in blocked
    assert "from carol@acme: assignment, text withheld (blocked)" in blocked
    assert "Regenerated the web fixtures" not in blocked.split("check_inbox")[1]
    assert "accept_handoff → refused: teammate_blocked (-32013)" in blocked
    looked_up = section(out, 6)
    assert re.search(r"bob +search_threads → 1 found for 'next_cursor from:alice@acme': "
                     r"\w{6} \(completed\)", looked_up)

    # Neither a log's bookkeeping nor repeated fences: a story, then a summary.
    assert "undelivered[" not in out and "is_error" not in out and "wait_seconds" not in out
    summary = out[out.index("What just happened"):]
    assert re.search(r"10 commits on the relay, one per operation", summary)
    assert "gitrelay log --relay $R --as alice@acme" in summary
    assert "git --git-dir $R log" in summary
    assert "gitrelay search next_cursor --relay $R" in summary
    assert "gitrelay web --relay $R --as alice@acme" in summary
    transcript = re.search(r"Every call and answer in full: (\S+)", summary)
    assert transcript
    return root.group(1), Path(transcript.group(1))


def check_transcript(path: Path) -> None:
    full = path.read_text()
    assert "bob's agent → accept_handoff" in full and "undelivered[0]" in full
    assert "teammate_blocked (-32013)" in full
    ops = re.findall(r"^   (\w+)", full.split("git log --format=%s main)", 1)[1], re.M)
    assert ops == ["handoff", "complete", "message", "message", "accept", "handoff",
                   "register", "register", "register", "init"]


def test_the_demo_tells_the_story_and_leaves_only_its_transcript():
    proc = subprocess.run([sys.executable, "-m", "gitrelay", "demo"], capture_output=True,
                          text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    root, transcript = check_story(proc.stdout)
    assert "The relay is gone now; `gitrelay demo --keep` keeps it" in proc.stdout
    try:
        check_transcript(transcript)
        assert transcript.parent == Path(root).parent
    finally:
        transcript.unlink()
    assert not Path(root).exists()
    assert demo_processes(root) == []


def test_the_kept_demo_gives_commands_that_run_as_printed(tmp_path):
    # A PATH without any gitrelay on it, as a new user's is after `make demo`.
    bare_path = os.pathsep.join(d for d in os.environ["PATH"].split(os.pathsep)
                                if not Path(d, "gitrelay").exists())
    proc = subprocess.run([sys.executable, "-m", "gitrelay", "demo", "--keep"],
                          capture_output=True, text=True, timeout=300, check=False,
                          env=dict(os.environ, PATH=bare_path))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    root, transcript = check_story(proc.stdout)
    try:
        assert transcript == Path(root) / "transcript.txt"
        commands = [ln.strip().split("  #")[0] for ln in proc.stdout.splitlines()
                    if re.match(r"   (export |R=|gitrelay |git )", ln)
                    and "gitrelay web" not in ln]  # a server: tests/web/test_web.py runs it
        # As printed, in that shell: the story's own PATH line must make them work.
        assert commands[0].startswith('export PATH="'), commands[:2]
        script = "set -e\n" + "\n".join(commands)
        ran = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                             timeout=120, check=False, cwd=tmp_path,
                             env=dict(os.environ, PATH=bare_path))
        assert ran.returncode == 0, ran.stderr
        assert "bob@acme completed: The admin user list" in ran.stdout  # gitrelay log
        assert "Alice Martin" in ran.stdout or "alice@acme" in ran.stdout  # gitrelay show
        assert "threads/" in ran.stdout  # git log --stat
        assert "next_cursor" in ran.stdout  # gitrelay search shows the matching snippet
    finally:
        shutil.rmtree(root)


def _build_wheel(dest: Path) -> Path:
    """A wheel of this source tree, built from a copy (the tree keeps no build files)."""
    src = dest / "src"
    shutil.copytree(ROOT, src, symlinks=True, ignore=shutil.ignore_patterns(
        ".venv", "*.egg-info", "__pycache__", ".git", ".pytest_cache", ".mypy_cache",
        ".ruff_cache", ".hypothesis", "bench"))
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                           str(dest / "dist"), str(src)], capture_output=True, text=True,
                          timeout=600, check=False)
    if proc.returncode != 0 and "Could not find a version that satisfies" in proc.stderr:
        pytest.skip("building a wheel needs setuptools from the package index, which is "
                    f"unreachable: {proc.stderr.strip().splitlines()[-1]}")
    assert proc.returncode == 0, proc.stderr
    (wheel,) = (dest / "dist").glob("gitrelay-*.whl")
    return wheel


def test_the_demo_runs_from_a_plain_install_of_the_wheel(tmp_path):
    wheel = _build_wheel(tmp_path)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    py = venv / "bin" / "python"
    site = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()"
                           "['purelib'])"], capture_output=True, text=True, check=True
                          ).stdout.strip()
    # gitrelay's dependencies from the test environment (a path line: that site's own .pth
    # files, the editable install of this tree among them, are not read), gitrelay itself
    # only from the wheel.
    Path(site, "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps",
                    "-q", str(wheel)], check=True, timeout=300, capture_output=True)
    where = subprocess.run([str(py), "-c", "import gitrelay; print(gitrelay.__file__)"],
                           capture_output=True, text=True, check=True, cwd=tmp_path)
    assert where.stdout.startswith(site), where.stdout

    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GITRELAY_EXAMPLE")}
    proc = subprocess.run([str(venv / "bin" / "gitrelay"), "demo"], capture_output=True,
                          text=True, timeout=300, check=False, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    root, transcript = check_story(proc.stdout)
    transcript.unlink()
    assert not Path(root).exists()
