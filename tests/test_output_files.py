"""Output files never replace special files (issue 24, item 4): the HTML report, the JSON,
the PR comment and ``ortperf export -o`` write through to a character device or a FIFO,
follow a symlink (the link stays), and refuse other kinds, naming the path.

Real device nodes (``mknod``, as root) or ``/dev/null``, real FIFOs with a real reader.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest
from ortperf_store_factories import latency, save

from pytest_ortperf.cli import main as ortperf_cli
from pytest_ortperf.files import append_text, replacing, write_atomic

SUITE = """
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine


def test_latency(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(measure=[[1e-4 * (1 + 0.001 * k) for k in range(25)]])
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={"N": 1}), name="lr")
"""


def _null_device(where: Path) -> Path:
    """A character device node at ``where`` (``mknod``, as root; a symlink to /dev/null
    otherwise)."""
    if os.geteuid() == 0:
        os.mknod(where, stat.S_IFCHR | 0o666, os.makedev(1, 3))  # /dev/null's numbers
    else:
        where.symlink_to("/dev/null")
    return where


class Reader:
    """A thread that reads a FIFO to its end."""

    def __init__(self, fifo: Path) -> None:
        self.data = b""
        self._thread = threading.Thread(target=self._read, args=(fifo,), daemon=True)
        self._thread.start()

    def _read(self, fifo: Path) -> None:
        with open(fifo, "rb") as fh:
            self.data = fh.read()

    def join(self) -> bytes:
        self._thread.join(timeout=30)
        assert not self._thread.is_alive(), "the writer never closed the FIFO"
        return self.data


def test_a_character_device_is_written_through_not_replaced(tmp_path: Path) -> None:
    device = _null_device(tmp_path / "n")
    write_atomic(device, "x" * 9000)
    assert stat.S_ISCHR(os.stat(device).st_mode)
    with replacing(device) as target:  # the parquet export's way
        target.write_bytes(b"binary")
    assert stat.S_ISCHR(os.stat(device).st_mode)
    assert os.listdir(tmp_path) == ["n"]  # no temp file left


def test_a_fifo_is_written_through_to_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    reader = Reader(fifo)
    for _ in range(200):  # the reader opens its end
        try:
            write_atomic(fifo, '{"a": 1}\n')
            break
        except OSError as exc:
            assert "a FIFO with no reader" in str(exc)
            threading.Event().wait(0.01)
    assert reader.join() == b'{"a": 1}\n'
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_a_fifo_without_a_reader_fails_at_once_naming_it(tmp_path: Path) -> None:
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="a FIFO with no reader") as caught:
        write_atomic(fifo, "text")
    assert caught.value.filename == str(fifo)
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)


def test_appending_to_a_fifo_without_a_reader_does_not_wait(tmp_path: Path) -> None:
    fifo = tmp_path / "summary.md"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="a FIFO with no reader"):
        append_text(fifo, "| a | b |\n")  # --ortperf-markdown, $GITHUB_STEP_SUMMARY
    reader = Reader(fifo)
    for _ in range(200):
        try:
            append_text(fifo, "line\n")
            break
        except OSError:
            threading.Event().wait(0.01)
    assert reader.join() == b"line\n"


def test_a_symlink_is_followed_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "reports" / "report.json"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "latest.json"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and os.readlink(link) == str(real)
    assert real.read_text() == "new"
    assert sorted(os.listdir(real.parent)) == ["report.json"]


def test_other_kinds_are_refused_naming_the_path(tmp_path: Path) -> None:
    directory = tmp_path / "out.json"
    directory.mkdir()
    with pytest.raises(OSError, match="a directory: not written") as caught:
        write_atomic(directory, "text")
    assert caught.value.filename == str(directory)


def test_pytest_json_and_report_to_a_device_leave_it_a_device(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=SUITE)
    device = _null_device(pytester.path / "n")
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--ortperf", "--ortperf-store=none", f"--ortperf-json={device}",
        f"--ortperf-report={device}", f"--ortperf-pr-comment={device}",
    )  # fmt: skip
    result.assert_outcomes(passed=1)
    assert stat.S_ISCHR(os.stat(device).st_mode)
    assert sorted(p.name for p in pytester.path.iterdir() if p.name.startswith(".n.")) == []


def test_ortperf_export_to_a_fifo_and_a_device(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "results.sqlite"
    save(db, [latency("t::a")])
    device = _null_device(tmp_path / "n")
    assert ortperf_cli(["export", "--store", str(db), "-o", str(device)]) == 0
    assert stat.S_ISCHR(os.stat(device).st_mode)
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    assert ortperf_cli(["export", "--store", str(db), "-o", str(fifo)]) == 2
    assert "a FIFO with no reader" in capsys.readouterr().err
    reader = Reader(fifo)
    for _ in range(200):
        if ortperf_cli(["export", "--store", str(db), "-o", str(fifo)]) == 0:
            break
        threading.Event().wait(0.01)
    assert reader.join().startswith(b"run_id,")
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
