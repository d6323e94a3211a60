"""Hostile test ids and measurement names in every report: the Markdown summary renders them
as written (no HTML, no Markdown of their own, tables whole), the terminal and the ``ortperf``
tables show control characters as escapes, the HTML report escapes them, and a Markdown
append that fails half-way leaves the file as it was."""

from __future__ import annotations

import errno
import os
import string
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from ortperf_store_factories import ENV, GIT, comparison, latency, memory, save

from pytest_ortperf.cli import main
from pytest_ortperf.files import append_text
from pytest_ortperf.reports.html import ReportInput, build_html
from pytest_ortperf.reports.json import RunInfo
from pytest_ortperf.reports.markdown import markdown_summary, md_code, md_line, md_text
from pytest_ortperf.reports.terminal import format_table, summary_lines
from pytest_ortperf.reports.writer import ReportFiles, RunResults, write_reports
from pytest_ortperf.results import Judgement, Record
from pytest_ortperf.store.write import save_run
from pytest_ortperf.text import escape_control

IMG = "<img src=x onerror=alert(1)>"
SCRIPT = "<script>alert(1)</script>"
NAMES = [
    IMG,
    SCRIPT,
    "a|b",
    "cr\rhere",
    "two\nlines",
    "tick`s ``two`` and `",
    "\x1b[31mred\x1b[0m",
    "nul\x00byte",
    "*em* _u_ [link](http://x) ![i](y) ~~s~~ $m$ &amp; &#60; #1 @you",
    "back\\|slash\\",
    "`",
    " spaced ",
    "- 1. list",
]
TEST = "t.py::test_x[a|b`c`<b>\\x1b]"
"""A test id as pytest makes it: control characters already spelled as escapes, but pipes,
backticks and markup kept."""
RAW = "\r\n\x00\x1b"
"""What must never reach a terminal or a Markdown line raw."""
IN_TEXT = set(RAW) - {"\n"}
"""What must not be in a whole text (whose lines end with ``\\n``)."""


def hostile_records() -> list[Record]:
    records: list[Record] = [latency(TEST, name) for name in NAMES]
    return [
        *records,
        comparison("t.py::test_cmp\x1b[2J", name="cmp\n|x|"),
        memory("t.py::test_mem", name="mem\x00<b>"),
    ]


def judgement(name: str) -> Judgement:
    verdict = {
        "metric": "latency",
        "outcome": "regressed",
        "baseline": 1e-3,
        "current": 2e-3,
        "change": 1.0,
        "low": 0.9,
        "high": 1.1,
        "threshold": 0.05,
        "alpha": 0.01,
        "p_value": 1e-6,
        "n": 20,
        "message": f"latency of {name!s}: +100% -> regressed | `x` {SCRIPT}\n\x1b[0m",
    }
    return Judgement.from_dict({"test": TEST, "name": name, "verdicts": [verdict]})


# --------------------------------------------------------------------------- escape_control


def test_escape_control_shows_control_characters_and_keeps_letters() -> None:
    assert escape_control("\x1b[31mred\x00\r\n\t\x7f\u202e") == (
        "\\x1b[31mred\\x00\\r\\n\\t\\x7f\\u202e"
    )
    for kept in ("plain", "Grüße ÿ 日本語 ж", "a\\x1b already escaped", "<b>|`*", ""):
        assert escape_control(kept) == kept


# --------------------------------------------------------------------------- Markdown

PUNCTUATION = set(string.punctuation)
UNSAFE = set("<>&*_[]~$|`") | set(RAW)
"""Characters that must not stand unescaped in Markdown text outside code spans."""


def inline(md: str) -> tuple[str, str]:
    """What a line of inline Markdown renders as text (CommonMark: backslash escapes, code
    spans fenced by equal backtick runs, one space stripped from each side of a padded
    span), and the unsafe characters left unescaped outside code spans."""
    out: list[str] = []
    unsafe: list[str] = []
    i = 0
    while i < len(md):
        c = md[i]
        if c == "\\" and i + 1 < len(md) and md[i + 1] in PUNCTUATION:
            out.append(md[i + 1])
            i += 2
            continue
        if c == "`":
            n = len(md[i:]) - len(md[i:].lstrip("`"))
            j = i + n
            close = None
            while j < len(md):
                if md[j] == "`":
                    m = len(md[j:]) - len(md[j:].lstrip("`"))
                    if m == n:
                        close = j
                        break
                    j += m
                else:
                    j += 1
            if close is None:  # no closing run: literal backticks
                unsafe.append(c)
                out.append("`" * n)
                i += n
                continue
            content = md[i + n : close]
            if content.startswith(" ") and content.endswith(" ") and content.strip(" "):
                content = content[1:-1]
            out.append(content)
            i = close + n
            continue
        if c in UNSAFE:
            unsafe.append(c)
        out.append(c)
        i += 1
    return "".join(out), "".join(unsafe)


def table_cells(line: str) -> list[str]:
    """Cells of a GitHub table row as GitHub's parser splits them: a backslash escapes the
    next character (a pipe too, inside code spans as well), ``\\|`` then reads ``|``."""
    assert line.startswith("| ") and line.endswith(" |"), line
    cells, cell, i = [], "", 1
    while i < len(line):
        if line[i] == "\\" and i + 1 < len(line):
            cell += line[i : i + 2]
            i += 2
        elif line[i] == "|":
            cells.append(cell.strip().replace("\\|", "|"))
            cell = ""
            i += 1
        else:
            cell += line[i]
            i += 1
    assert cell == "", line
    return cells


def inline_cell(cell: str) -> tuple[str, str]:
    """:func:`inline` of a table cell (its pipes, unescaped by the table, are text)."""
    rendered, unsafe = inline(cell)
    return rendered, unsafe.replace("|", "")


@pytest.mark.parametrize("text", [*NAMES, TEST, "", "``", "a``b`c"])
def test_md_text_and_code_render_the_text_as_written(text: str) -> None:
    expected = escape_control(text)
    for md in (md_text(text), md_code(text)):
        assert not set(RAW) & set(md)
        rendered, unsafe = inline(md)
        assert (rendered, unsafe) == (expected, "")
    rendered, unsafe = inline(md_line(text))
    assert rendered == expected.lstrip() and unsafe == ""
    assert not md_line(text)[:1].isspace() and not md_line(text).startswith(tuple("-+=>#"))
    (cell,) = table_cells(f"| {md_code(text, table=True)} |")
    assert inline_cell(cell) == (expected, "")


def test_code_spans_use_a_longer_fence() -> None:
    assert md_code("plain id") == "`plain id`"
    assert md_code("a`b") == "``a`b``"
    assert md_code("``x`") == "``` ``x` ```"
    assert md_code(" x ") == "`  x  `"
    assert md_code("a|b", table=True) == "`a\\|b`"
    assert md_code("a|b") == "`a|b`"  # no table: a pipe is text


def test_bare_links_and_emoji_codes_stay_text() -> None:
    # GitHub links bare http://... and www.... and shows :smile: as an emoji
    assert md_text("see http://x.io, WWW.x.io :smile:") == (
        "see http\\://x.io, WWW\\.x.io \\:smile\\:"
    )


def test_markdown_summary_of_hostile_names() -> None:
    records = hostile_records()
    judgements = [judgement(IMG), judgement("tick`s ``two`` and `")]
    notes = ["- a note\nwith <b>lines</b>", "1. baseline of t.py::test_x changed\x1b[0m"]
    text = markdown_summary(records, judgements, notes=notes, report_path="out/`r`.html")
    assert not IN_TEXT & set(text)
    lines = text.split("\n")

    table = [line for line in lines if line.startswith("|")]
    assert table[1] == "|---|---|---|---|---|---|"
    del table[1]
    assert len(table) == 1 + len(records)  # header, one row per record
    shown = {inline_cell(table_cells(row)[2])[0] for row in table[1:]}
    for row in table[1:]:
        cells = table_cells(row)
        assert len(cells) == 6, row
        for cell in cells:
            assert inline_cell(cell)[1] == "", (cell, row)
    assert {escape_control(name).strip() for name in NAMES} <= shown  # cells are stripped
    tests = {inline_cell(table_cells(row)[1])[0] for row in table[1:]}
    assert escape_control(TEST) in tests and "t.py::test_cmp\\x1b[2J" in tests

    items = [line for line in lines if line.startswith("- **regressed**")]
    assert len(items) == 2
    messages = [lines[lines.index(item) + 1] for item in items]
    for line in [item.removeprefix("- **regressed**") for item in items] + messages:
        assert inline(line)[1] == "", line
    assert inline(items[0])[0] == f"- **regressed** {TEST}::{IMG} latency:"
    assert inline(messages[0])[0] == "  " + escape_control(judgement(IMG).verdicts[0].message)

    quoted = [line for line in lines if line.startswith("> ")]
    assert len(quoted) == 2
    assert quoted[0].startswith("> \\- a note\\\\nwith \\<b\\>")
    assert quoted[1].startswith("> 1\\. baseline")
    assert all(inline(line[2:])[1] == "" for line in quoted)
    assert inline(lines[lines.index(quoted[1]) + 1]) == ("Full report: out/`r`.html", "")


def test_markdown_cells_stay_cells_with_pipes_after_backslashes() -> None:
    text = markdown_summary([latency("t.py::test_a\\|b", "n\\|m")])
    row = [line for line in text.splitlines() if line.startswith("| ")][1]
    cells = table_cells(row)
    assert len(cells) == 6
    assert inline_cell(cells[1]) == ("t.py::test_a\\|b", "")
    assert inline_cell(cells[2]) == ("n\\|m", "")


# --------------------------------------------------------------------------- append


def _section() -> str:
    return markdown_summary([latency("t.py::test_a", "é日本")], notes=["✅ note"])


@pytest.mark.parametrize("fail", [True, False], ids=["error", "short"])
def test_a_full_disk_leaves_the_summary_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fail: bool
) -> None:
    target = tmp_path / "step_summary.md"
    before = "# earlier step\n\nßäö ✅\n".encode()
    target.write_bytes(before)
    text = _section()
    real_write = os.write

    def write(fd: int, data: bytes) -> int:  # half the bytes (mid-character), then full
        n = real_write(fd, data[: len(data) // 2 + 1])
        if fail:
            raise OSError(errno.ENOSPC, "No space left on device")
        return n

    monkeypatch.setattr(os, "write", write)
    with pytest.raises(OSError):
        append_text(target, text)
    assert target.read_bytes() == before

    results = RunResults(run=RunInfo(started=0.0, finished=1.0), records=[latency("t.py::t")])
    lines = write_reports(ReportFiles(markdown=(target,)), results)
    assert len(lines) == 1 and "Markdown summary NOT written to" in lines[0]
    assert target.read_bytes() == before

    missing = tmp_path / "new" / "summary.md"
    with pytest.raises(OSError):
        append_text(missing, text)
    assert not missing.exists()

    monkeypatch.setattr(os, "write", real_write)
    append_text(target, text)
    assert target.read_bytes() == before + text.encode()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_FSIZE, SIGXFSZ")
def test_a_file_size_limit_leaves_the_summary_as_it_was(tmp_path: Path) -> None:
    """A real short write: the kernel stops at RLIMIT_FSIZE (as at a full disk)."""
    target = tmp_path / "step_summary.md"
    before = b"# earlier step\n"
    target.write_bytes(before)
    text = _section() * 20
    code = textwrap.dedent(
        f"""
        import resource, signal, sys
        from pathlib import Path
        from pytest_ortperf.files import append_text
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        limit = {len(before) + len(text.encode()) // 2 + 1}
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
        try:
            append_text(Path(sys.argv[1]), sys.stdin.read())
        except OSError as exc:
            print("raised", exc)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(target)],
        input=text,
        capture_output=True,
        text=True,
        encoding="utf-8",
        check=True,
    )
    assert "raised" in done.stdout
    assert target.read_bytes() == before


# --------------------------------------------------------------------------- terminal


def test_summary_lines_escape_control_characters() -> None:
    records = hostile_records()
    lines = summary_lines(records, [judgement(IMG)])
    assert not any(set(RAW) & set(line) for line in lines)
    # one line per record and per gated metric, plus headers and separators, and the
    # suite-level line under the gated table
    tables = 3 + 1  # latency, comparison, memory, gated
    assert len(lines) == len(records) + 1 + 2 * tables + (tables - 1) + 1
    assert lines[-1].startswith("1 timing verdict gated at alpha")
    text = "\n".join(lines)
    assert "\\x1b[31mred\\x1b[0m" in text and "nul\\x00byte" in text
    assert "two\\nlines" in text and "cr\\rhere" in text and "mem\\x00<b>" in text


def test_format_table_measures_the_escaped_text() -> None:
    lines = format_table(("name", "n"), [("a\nb", "1"), ("\x1b[1m", "22")])
    assert lines == ["name     n", "-------  --", "a\\nb      1", "\\x1b[1m  22"]


def test_a_run_with_a_hostile_name_prints_escapes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        r"""
        import pytest
        from pytest_ortperf import models
        from pytest_ortperf.testing import ScriptedEngine

        @pytest.mark.parametrize("p", ["\x1b[31m|`<b>\n"], ids=["id\x1b[31m|`<b>"])
        def test_hostile(ort_session, ort_feeds, ortperf, p):
            ortperf.engine = ScriptedEngine(measure=[(1e-3, 2e-3, 3e-3)])
            s = ort_session(models.linear_regression())
            ortperf.latency(s, ort_feeds(s, dims={"N": 2}), name="n\x1b[2J\x00\r\nX" + p)
        """
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf", "--color=no")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "\x1b" not in out and "\x00" not in out and "\r" not in out
    result.stdout.fnmatch_lines(
        ["*::test_hostile[[]id\\x1b[[]31m|`<b>]::n\\x1b[[]2J\\x00\\r\\nX\\x1b[[]31m|`<b>\\n*run*"]
    )


# --------------------------------------------------------------------------- ortperf CLI


@pytest.fixture
def hostile_store(tmp_path: Path) -> Path:
    path = tmp_path / "results.sqlite"
    records: list[Record] = [
        latency(TEST, "lat\x1b[31m\n|x"),
        comparison(TEST, name="cmp\x00\r<b>"),
    ]
    env = {**ENV, "cpu_model": "CPU\x1b]0;title\x07\nX"}
    for started in (1_700_000_000.0, 1_700_000_060.0):
        save_run(
            path,
            started=started,
            finished=started + 5.0,
            command_line="pytest --ortperf",
            git={**GIT, "branch": "br\x1b[2J\nanch"},
            environment=env,
            records=records,
        )
    save(path, [latency("t.py::plain")])
    return path


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> list[str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert code in (0, 1), err
    assert not IN_TEXT & set(out)
    return out.splitlines()


def test_cli_tables_escape_control_characters(
    hostile_store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(hostile_store)
    history = _run(capsys, "history", "--store", db)
    titles = [line for line in history if "change of the" in line]
    assert len(titles) == 3
    assert any(line.startswith(escape_control(TEST) + "  [lat\\x1b[31m\\n|x]") for line in titles)
    # a NUL is stored as U+FFFD on every backend (PostgreSQL cannot store it: issue 24)
    assert any("[cmp\ufffd\\r<b>]" in line for line in titles)
    assert len(history) == 3 * 3 + (2 + 2 + 1) + 2  # title and header of 3 blocks, runs, gaps

    runs = _run(capsys, "runs", "--store", db)
    # one row per run (wider than the terminal, it wraps by whole cells under its id)
    ids = [line.split()[0] for line in runs if line.split() and line.split()[0].isdigit()]
    assert sorted(ids) == ["1", "2", "3"]
    text = "\n".join(runs)
    assert "br\\x1b[2J\\nanch" in text and "\\x07" in text  # escaped where shown
    assert not any(c in line for line in runs for c in "\x1b\x07\x00\r")  # never raw

    compare = _run(capsys, "compare", "1", "2", "--store", db)
    assert len(compare) == 2 + 2 + 5  # header, 2 rows, a gap, the tally, its 3-line legend
    rows = compare[2:4]  # test ids cut from the left
    assert any("::lat\\x1b[31m\\n|x" in row for row in rows)
    assert any("::cmp\ufffd\\r<b>" in row for row in rows)


# --------------------------------------------------------------------------- HTML


def test_html_report_escapes_hostile_names() -> None:
    quote = "q\" onmouseover=\"alert(1)' x='y"
    records = [*hostile_records(), latency(f"t.py::{quote}", quote)]
    page = build_html(
        ReportInput(tuple(records), (judgement(IMG),), notes=(SCRIPT,)), charts_enabled=False
    )
    page = page.replace("<wbr>", "")
    for hostile in (IMG, SCRIPT, "<b>", quote, 'onmouseover="alert'):
        assert hostile not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "onmouseover=&quot;alert(1)&#x27; x=&#x27;y" in page
    assert page.count("<script>") == page.count("</script>") == 1  # the report's own
