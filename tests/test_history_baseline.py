"""History baselines (``--ortperf-baseline=history``): scripted histories written to a real
SQLite store (injected samples, no timing luck), the options' validation, and one run of
real sessions gated against the runs stored before it."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from ortperf_store_factories import ENV, GIT, OTHER_ENV, SESSION, latency, measured_comparison
from pg_server import Postgres

from pytest_ortperf.gating.gate import failure_message
from pytest_ortperf.gating.history import MIN_RUNS
from pytest_ortperf.gating.history_baseline import HistoryBaselines, HistoryGate, resolve_machine
from pytest_ortperf.gating.settings import MIN_HISTORY_RUNS, GateSettings, HistorySettings
from pytest_ortperf.machine import machine_fingerprint
from pytest_ortperf.recorder.cold_start import judge_cold_start
from pytest_ortperf.results import ColdStartResult, Outcome, Record, Verdict
from pytest_ortperf.store.read import list_runs
from pytest_ortperf.store.write import save_run
from pytest_ortperf.units import format_change, format_interval

T0 = 1_700_000_000.0
TEST = "tests/test_perf.py::test_fused"
NAME = "fused"
MACHINE = machine_fingerprint(ENV)
OTHER_MACHINE = machine_fingerprint(OTHER_ENV)
# What this machine's environment holds besides the factories' keys (a real run stores them).
HERE = {**ENV, "isa": ["avx2", "fma"], "ort_build": "cpu", "effective_cpus": 4,
        "fingerprint": MACHINE}  # fmt: skip


def ratios(level: float, seed: int, n: int = 25, noise: float = 0.01) -> list[float]:
    """Block ratios of one run: ``level`` moved by a between-run offset (0.3%) and
    per-block noise, seeded."""
    rng = np.random.default_rng(seed)
    offset = rng.normal(0.0, 0.003)
    return (level * np.exp(offset + rng.normal(0.0, noise, n))).tolist()


def compare(level: float, seed: int) -> Record:
    return measured_comparison(TEST, ratios(level, seed), NAME)


def timing(median: float, seed: int) -> Record:
    """An absolute latency whose median is ``median`` moved by 0.5% between runs."""
    rng = np.random.default_rng(1000 + seed)
    return latency(TEST, "lr", median * float(np.exp(rng.normal(0.0, 0.005))))


def stored(
    path: Path | str,
    records: Sequence[Record],
    *,
    at: float,
    env: Mapping[str, Any] = HERE,
    branch: str | None = "main",
    interrupted: bool = False,
) -> int:
    return save_run(
        path, started=at, finished=at + 5.0, command_line="pytest --ortperf",
        git={**GIT, "branch": branch}, environment=env, records=records,
        interrupted=interrupted,
    )  # fmt: skip


def history(
    path: Path | str, levels: Sequence[float], *, start: int = 0, **kwargs: Any
) -> list[int]:
    """One stored run per level (a compare at that ratio, a latency of that many ms)."""
    return [
        stored(
            path,
            [compare(lv, start + i), timing(lv * 1e-3, start + i)],
            at=T0 + 100.0 * (start + i),
            **kwargs,
        )
        for i, lv in enumerate(levels)
    ]


def gate(
    path: Path | str, *, window: int = 10, branch: str = "main", **settings: Any
) -> HistoryGate:
    source = HistoryBaselines(
        str(path), HistorySettings(branch=branch, window=window), lambda: MACHINE
    )
    return HistoryGate(GateSettings(**settings), source, lambda: HERE)


def judge(g: HistoryGate, record: Record) -> list[Verdict]:
    """What the gate says of ``record`` (asking for its entry first, as the recorder does)."""
    return g.judge(record.to_dict(), g.entry(record.test, record.name))


def by_metric(verdicts: Sequence[Verdict]) -> dict[str, Verdict]:
    return {v.metric: v for v in verdicts}


@pytest.fixture(params=["sqlite", "postgresql"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """An empty store: a SQLite file, or a new database on the suite's PostgreSQL server
    (skipped without one, see tests/conftest.py)."""
    if request.param == "sqlite":
        return str(tmp_path / "results.sqlite")
    server: Postgres = request.getfixturevalue("postgres")
    return server.url(server.new_database())


STEADY = [0.9] * 6


def test_ratios_and_latencies_need_as_many_runs() -> None:
    assert MIN_HISTORY_RUNS == MIN_RUNS == 5


# -- ratios --------------------------------------------------------------------------------


def test_ratio_within_its_history_is_ok(db: str) -> None:
    ids = history(db, STEADY)
    verdicts = by_metric(judge(gate(db), compare(0.9, 99)))
    ratio = verdicts["ratio"]
    assert ratio.outcome is Outcome.OK, ratio.message
    assert f"history baseline: 6 runs on branch 'main', machine class {MACHINE}" in ratio.message
    assert f"(runs {ids[0]}-{ids[-1]})" in ratio.message
    assert "(6 runs, 150 blocks)" in ratio.message  # each stored run is one run of the model
    assert verdicts["structure"].outcome is Outcome.OK


def test_ratio_regressed_against_its_history_fails(db: str) -> None:
    history(db, STEADY)
    g = gate(db)
    verdicts = judge(g, compare(1.0, 99))  # 11% slower
    ratio = by_metric(verdicts)["ratio"]
    assert ratio.outcome is Outcome.REGRESSED, ratio.message
    assert ratio.change == pytest.approx(0.11, abs=0.02)
    failing = g.failing(verdicts)
    assert failing == [ratio]
    message = failure_message(NAME, failing, verdicts)
    assert "history baseline follows once the runs of its window" in message
    assert "--ortperf-update" not in message


def test_not_enough_history_is_new_and_fails_only_under_strict(db: str) -> None:
    history(db, [0.9] * (MIN_HISTORY_RUNS - 2))
    verdicts = by_metric(judge(gate(db), compare(1.5, 99)))
    ratio, structure = verdicts["ratio"], verdicts["structure"]
    assert ratio.outcome is Outcome.NEW and structure.outcome is Outcome.NEW
    expected = (
        f"not gated: no history baseline yet: 3 of {MIN_HISTORY_RUNS} runs needed found on "
        f"branch 'main', machine class {MACHINE} (window 10)"
    )
    assert expected in ratio.message
    assert not ratio.failed(strict=False) and ratio.failed(strict=True)
    strict = gate(db, strict=True)
    failing = strict.failing(judge(strict, compare(1.5, 99)))
    message = failure_message(NAME, failing, failing)
    assert "no history baseline yet: the runs of `pytest --ortperf` on its branch" in message
    assert "--ortperf-update" not in message


def test_other_machine_classes_never_count(db: str) -> None:
    history(db, [1.5] * 8, env={**HERE, **OTHER_ENV, "fingerprint": OTHER_MACHINE})
    history(db, [0.9] * 2, start=8)
    ratio = by_metric(judge(gate(db), compare(0.9, 99)))["ratio"]
    assert ratio.outcome is Outcome.NEW
    assert f"2 of {MIN_HISTORY_RUNS} runs needed found on branch 'main', machine class " \
        f"{MACHINE}" in ratio.message  # fmt: skip
    # Named on purpose, the other class's runs are its baseline (the fingerprint check
    # then refuses another CPU's ratio unless the team lets cpu_model differ).
    other = HistoryBaselines(db, HistorySettings(machine=OTHER_MACHINE), lambda: MACHINE)
    entry, found = other.compare_entry(TEST, NAME)
    assert entry is not None and len(found.runs) == 8 and entry["ratio"] > 1.4
    refused = by_metric(HistoryGate(GateSettings(), other, lambda: HERE).judge(
        compare(0.9, 99).to_dict(), entry))["ratio"]  # fmt: skip
    assert refused.outcome is Outcome.NOT_COMPARABLE and "cpu_model" in refused.message


def test_other_branches_and_interrupted_runs_never_count(db: str) -> None:
    history(db, [1.5] * 6, branch="feature")
    history(db, [1.5] * 6, start=6, branch=None)  # detached HEAD: no branch stored
    history(db, [1.5] * 3, start=12, interrupted=True)
    history(db, [0.9] * 5, start=15)
    ratio = by_metric(judge(gate(db), compare(0.9, 99)))["ratio"]
    assert ratio.outcome is Outcome.OK, ratio.message
    assert "5 runs on branch 'main'" in ratio.message
    feature = by_metric(judge(gate(db, branch="feature"), compare(0.9, 99)))["ratio"]
    assert feature.outcome is Outcome.IMPROVED and "branch 'feature'" in feature.message


def test_window_takes_the_newest_runs_only(db: str) -> None:
    old = history(db, [1.2] * 10)
    new = history(db, [0.9] * 5, start=10)
    g = gate(db, window=5)
    entry = g.entry(TEST, NAME)
    assert entry is not None and entry["history"]["run_ids"] == new
    assert entry["runs"] == [25] * 5
    assert by_metric(judge(g, compare(0.9, 99)))["ratio"].outcome is Outcome.OK
    wide = gate(db, window=15).entry(TEST, NAME)
    assert wide is not None and wide["history"]["run_ids"] == old + new
    # The newest stored run of a measurement wins when a run stored it twice.
    again = stored(db, [compare(0.5, 200), compare(0.9, 201)], at=T0 + 10_000)
    entry = gate(db, window=5).entry(TEST, NAME)
    assert entry is not None and entry["history"]["run_ids"] == [*new[1:], again]
    assert entry["block_ratios"][-25:] == pytest.approx(ratios(0.9, 201))


def test_runs_with_other_settings_are_set_aside(db: str) -> None:
    history(db, [0.9] * 4, env={**HERE, "ort_version": "1.31.0"})
    history(db, [0.9] * 3, start=4)
    ratio = by_metric(judge(gate(db), compare(0.9, 99)))["ratio"]
    assert ratio.outcome is Outcome.NEW
    assert "3 of 5 runs needed" in ratio.message
    assert "4 runs of the window set aside (measured with ort_version: '1.31.0' -> " \
        "'1.32.0')" in ratio.message  # fmt: skip
    ignoring = by_metric(judge(gate(db, fingerprint_ignore=("ort_version",)),
                               compare(0.9, 99)))["ratio"]  # fmt: skip
    assert ignoring.outcome is Outcome.OK and "7 runs" in ignoring.message


def test_an_unreadable_store_is_not_gated_and_says_why(tmp_path: Path) -> None:
    bad = tmp_path / "results.sqlite"
    bad.write_text("not a database")
    ratio = by_metric(judge(gate(bad), compare(0.9, 99)))["ratio"]
    assert ratio.outcome is Outcome.NEW
    assert "history baseline unavailable" in ratio.message and str(bad) in ratio.message


# -- latencies ------------------------------------------------------------------------------


def test_latency_against_the_medians_of_its_history(db: str) -> None:
    history(db, STEADY)
    g = gate(db)
    same = g.judge(timing(0.9e-3, 99).to_dict(), None)
    assert [v.outcome for v in same] == [Outcome.OK], same[0].message
    assert "geometric mean of 6 run medians" in same[0].message
    assert "history baseline: 6 runs on branch 'main'" in same[0].message
    slow = g.judge(timing(1.2e-3, 99).to_dict(), None)
    assert slow[0].outcome is Outcome.REGRESSED, slow[0].message


def test_latency_without_enough_history_is_new(db: str) -> None:
    history(db, [0.9] * 4)
    history(db, [0.9] * 4, start=4, env={**HERE, **OTHER_ENV, "fingerprint": OTHER_MACHINE})
    verdict = gate(db).judge(timing(2e-3, 99).to_dict(), None)[0]
    assert verdict.outcome is Outcome.NEW and verdict.failed(strict=True)
    assert "4 of 5 runs needed found on branch 'main'" in verdict.message


def test_latency_runs_through_another_api_are_set_aside(db: str) -> None:
    history(db, STEADY)
    record = timing(0.9e-3, 99).to_dict()
    verdict = gate(db).judge({**record, "api": "iobinding"}, None)[0]
    assert verdict.outcome is Outcome.NEW
    assert "6 runs of the window set aside (measured with api run -> iobinding)" in (
        verdict.message
    )


def cold(create: float, seed: int) -> Record:
    """A cold start whose launches create in about ``create`` s and first-run in a tenth."""
    rng = np.random.default_rng(2000 + seed)
    level = float(np.exp(rng.normal(0.0, 0.01)))
    return ColdStartResult(
        TEST, "cold", tuple(create * level * (1 + 0.001 * i) for i in range(5)),
        tuple(create * level * 0.1 * (1 + 0.001 * i) for i in range(5)), session=SESSION,
    )  # fmt: skip


def cold_verdicts(g: HistoryGate, record: ColdStartResult) -> dict[str, Verdict]:
    """The history gate's verdicts of each figure, as the recorder judges them."""
    return {v.metric.removeprefix("cold_start."): v for v in judge_cold_start(TEST, record, g)}


def test_cold_start_is_gated_against_its_history(db: str) -> None:
    # Issue 24 item 19: "not gated: 0 of 5 earlier runs" with 20 stored runs.
    for i in range(8):
        stored(db, [cold(0.2, i)], at=T0 + 100.0 * i)
    g = gate(db)
    same = cold_verdicts(g, cold(0.2, 99))
    assert {f: v.outcome for f, v in same.items()} == {"create": Outcome.OK,
                                                        "first_run": Outcome.OK}, same  # fmt: skip
    assert all(v.n == 8 for v in same.values())
    slow = cold_verdicts(g, cold(0.3, 99))
    assert slow["create"].outcome is Outcome.REGRESSED, slow["create"].message
    # Judged at the latencies' threshold, 0 included (once taken for "not set").
    assert {v.threshold for v in same.values()} == {0.05}
    strict = cold_verdicts(gate(db, threshold=0.5, latency_threshold=0.0), cold(0.2, 99))
    assert {v.threshold for v in strict.values()} == {0.0}


def test_one_run_set_aside_reads_in_the_singular(db: str) -> None:
    history(db, STEADY)
    stored(db, [timing(0.9e-3, 50)], at=T0 + 5000.0, env={**HERE, "ort_version": "9.9.9"})
    verdict = gate(db).judge(timing(0.9e-3, 99).to_dict(), None)[0]
    assert "; 1 run of the window set aside (measured with ort_version" in verdict.message


def spread_compare(level: float, seed: int, between: float = 0.03) -> Record:
    """A comparison whose run reads ``level`` moved by a between-run offset of SD
    ``between`` (session pairs, processes), with 1% block noise."""
    rng = np.random.default_rng(3000 + seed)
    offset = float(rng.normal(0.0, between))
    return measured_comparison(TEST, (level * np.exp(offset + rng.normal(0.0, 0.01, 25))).tolist(),
                               NAME)  # fmt: skip


def test_compare_command_judges_as_the_history_gate(
    db: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Issue 24 item 20: `ortperf compare 23 24` said regressed +7.9% [+1.7%, +14.5%] where
    # the gate called the same change inconclusive +10.3% [-5.8%, +29.2%].
    from pytest_ortperf.cli import main

    ids = [stored(db, [spread_compare(1.0, i)], at=T0 + 100.0 * i) for i in range(8)]
    stored(db, [spread_compare(1.0, 50)], at=T0 + 5000.0, branch="feature")  # not main's
    checks = 0
    for seed, level in ((90, 1.06), (91, 1.25), (92, 1.0)):
        record = spread_compare(level, seed, between=0.0)
        verdict = by_metric(judge(gate(db), record))["ratio"]
        run_b = stored(db, [record], at=T0 + 9000.0 + seed, branch="pr")
        code = main(["compare", str(ids[-1]), str(run_b), "--store", db])
        out = capsys.readouterr().out
        (line,) = [row for row in out.splitlines() if "  compare  " in row]
        cells = line.split()
        assert cells[-1] == verdict.outcome.value, (line, verdict.message)
        assert (
            f"{format_change(verdict.change)} {format_interval(verdict.low, verdict.high)}" in line
        )
        assert code == (1 if verdict.outcome is Outcome.REGRESSED else 0)
        checks += verdict.outcome is Outcome.INCONCLUSIVE
    assert checks == 1  # the history's spread makes +6% too noisy to tell


def test_runs_outside_ci_never_pollute_a_history_of_ci_runs(db: str) -> None:
    # Issue 24 item 23: every local `--ortperf` run on main joined main's history window,
    # runs slowed on purpose included. Where the window holds CI runs, only they count.
    history(db, [0.9] * 6, env={**HERE, "ci": True})
    history(db, [1.3] * 3, start=6, env={**HERE, "ci": False})  # slowed on purpose, locally
    g = gate(db)
    ratio = by_metric(judge(g, compare(0.9, 99)))["ratio"]
    latency = g.judge(timing(0.9e-3, 99).to_dict(), None)[0]
    for verdict in (ratio, latency):
        assert verdict.outcome is Outcome.OK, verdict.message
        assert "history baseline: 6 runs on branch 'main'" in verdict.message
        assert "3 runs of the window set aside (a run outside CI ($CI unset))" in verdict.message
    # A history of local runs only (no CI on this machine class) is a history all the same.
    local = str(Path(db).with_name("local.sqlite")) if "://" not in db else None
    if local is not None:
        history(local, [0.9] * 6, env={**HERE, "ci": False})
        verdict = gate(local).judge(timing(0.9e-3, 99).to_dict(), None)[0]
        assert verdict.outcome is Outcome.OK and "6 runs on branch" in verdict.message


@pytest.mark.parametrize(
    ("value", "expected"),
    [(None, False), ("", False), ("true", True), ("1", True), ("False", False), ("0", False)],
)
def test_runs_record_whether_they_ran_on_ci(
    monkeypatch: pytest.MonkeyPatch, value: str | None, expected: bool
) -> None:
    from pytest_ortperf import machine

    if value is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", value)
    data = machine.collect_environment()
    assert data["ci"] is expected
    assert data["fingerprint"] == machine.machine_fingerprint({**data, "ci": not expected})


# -- machine classes ------------------------------------------------------------------------


def test_machine_prefix_resolves_to_one_class(db: str) -> None:
    history(db, [0.9], env={**HERE, "fingerprint": MACHINE})
    assert resolve_machine(db, MACHINE[:6].upper()) == MACHINE
    assert resolve_machine(db, "0123456789ab") == "0123456789ab"  # a full one as it is
    unknown = "ffff" if not MACHINE.startswith("ffff") else "eeee"
    with pytest.raises(
        ValueError,
        match=f"machine class '{unknown}' matches none of the stored machine classes .*{MACHINE}",
    ):
        resolve_machine(db, unknown)
    for i in (1, 2):
        history(db, [0.9], start=i, env={**HERE, "fingerprint": f"abcd0000000{i}"})
    with pytest.raises(ValueError, match=r"'abcd' matches several .*abcd00000001, abcd00000002"):
        resolve_machine(db, "abcd")
    assert resolve_machine(db, "abcd00000002") == "abcd00000002"


# -- the plugin -----------------------------------------------------------------------------

INNER = """
import json, pathlib
from pytest_ortperf import models
from pytest_ortperf.testing import ScriptedEngine

SCRIPT = json.loads(pathlib.Path(__file__).with_name("script.json").read_text())


def test_attention(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(interleave=SCRIPT["compare"])
    ref = ort_session(models.attention(), optimization="disable")
    cand = ort_session(models.attention())
    ortperf.compare(ref, cand, ort_feeds(ref, dims={"B": 1}), name="attention")


def test_latency(ort_session, ort_feeds, ortperf):
    ortperf.engine = ScriptedEngine(measure=SCRIPT["latency"])
    s = ort_session(models.linear_regression())
    ortperf.latency(s, ort_feeds(s, dims={"N": 1}), name="lr")
"""

BASE = 1e-4
FAST = ("-p", "no:cacheprovider", "--ortperf-baseline=history")


def script(pytester: pytest.Pytester, ratio: float, scale: float, seed: int) -> None:
    rng = np.random.default_rng(seed)
    ref = BASE * np.exp(rng.normal(0, 0.01, 25))
    cand = ref * ratio * np.exp(rng.normal(0.0, 0.003) + rng.normal(0, 0.01, 25))
    lat = BASE * scale * np.exp(rng.normal(0.0, 0.003) + rng.normal(0, 0.01, 25))
    data = {"compare": [[ref.tolist(), cand.tolist()]], "latency": [lat.tolist()]}
    (pytester.path / "script.json").write_text(json.dumps(data))


def git(path: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=path, check=True, capture_output=True)


def verdicts_of(pytester: pytest.Pytester) -> dict[tuple[str, str], tuple[str, str]]:
    """(measurement name, metric) -> (outcome, message) of the run's --ortperf-json file."""
    doc = json.loads((pytester.path / "out.json").read_text())
    return {
        (r["name"], v["metric"]): (v["outcome"], v["message"])
        for r in doc["results"]
        for v in r["verdicts"]
    }


@pytest.mark.skipif(shutil.which("git") is None, reason="git not installed")
def test_runs_on_main_become_the_baseline_of_the_next_run(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_perf=INNER)
    git(pytester.path, "init", "-q", "-b", "main")
    git(pytester.path, "add", "test_perf.py")
    git(pytester.path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "i")
    db = pytester.path / "results.sqlite"
    run = (*FAST, f"--ortperf-store={db}", "--ortperf", "--ortperf-json=out.json")
    for seed in range(MIN_HISTORY_RUNS):
        script(pytester, 0.9, 1.0, seed)
        result = pytester.runpytest(*run)
        result.assert_outcomes(passed=2)
        found = verdicts_of(pytester)
        for key in (("attention", "ratio"), ("lr", "latency")):
            outcome, message = found[key]
            assert outcome == "new"
            assert f"not gated: no history baseline yet: {seed} of 5 runs" in message
    result.stdout.fnmatch_lines(["*against the history of branch 'main'*last 10 runs*"])
    runs = list_runs(db)
    assert list(runs["branch"]) == ["main"] * MIN_HISTORY_RUNS
    settings = json.loads((pytester.path / "out.json").read_text())["settings"]
    assert settings["baseline"] == "history"
    assert settings["history"] == {"branch": "main", "machine": None, "window": 10}
    assert not (pytester.path / "__ortperf__").exists()  # history mode writes no files

    script(pytester, 0.9, 1.0, 50)
    pytester.runpytest(*run).assert_outcomes(passed=2)
    found = verdicts_of(pytester)
    assert found["attention", "structure"][0] == "ok"
    for key in (("attention", "ratio"), ("lr", "latency")):
        outcome, message = found[key]
        assert outcome == "ok", message
        assert "history baseline: 5 runs on branch 'main'" in message

    script(pytester, 1.0, 1.3, 60)  # the candidate 11% slower, the latency 30%
    slower = pytester.runpytest(*run)
    slower.assert_outcomes(failed=2)
    slower.stdout.fnmatch_lines(
        [
            "*FAIL ratio:*vs baseline*(6 runs, * blocks)*regressed*history baseline: 6 runs*",
            "*the history baseline follows once the runs of its window*",
        ]
    )
    slower.stdout.fnmatch_lines(["*FAIL latency:*geometric mean of 6 run medians*regressed*"])

    # Another branch has no history of its own (until its runs are stored).
    git(pytester.path, "checkout", "-q", "-b", "feature")
    script(pytester, 0.9, 1.0, 70)
    pytester.runpytest(*run, "--ortperf-history-branch=feature").assert_outcomes(passed=2)
    outcome, message = verdicts_of(pytester)["attention", "ratio"]
    assert outcome == "new" and "0 of 5 runs needed found on branch 'feature'" in message
    strict = pytester.runpytest(*run, "--ortperf-strict", "--ortperf-history-branch=feature")
    strict.assert_outcomes(failed=2)
    strict.stdout.fnmatch_lines(["*no history baseline yet: the runs of `pytest --ortperf`*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--ortperf-baseline=histroy",), "*--ortperf-baseline must be one of files, history, "
                                          "got 'histroy'*did you mean*history*"),
        (("--ortperf-baseline=history", "--ortperf-update"),
         "*--ortperf-update writes the baseline files, which --ortperf-baseline=history does "
         "not read*"),
        (("--ortperf-history-window=3",), "*--ortperf-history-window must be from 5 to 1000, "
                                          "got '3': fewer than 5 runs never gate*"),
        (("--ortperf-history-window=ten",), "*--ortperf-history-window must be a whole number "
                                            "of runs, got 'ten'*"),
        (("--ortperf-history-machine=xyz1",), "*--ortperf-history-machine must be a machine "
                                              "class*got 'xyz1'*"),
        (("--ortperf-history-branch= ",), "*--ortperf-history-branch must be a git branch "
                                          "name*"),
        (("--ortperf", "--ortperf-baseline=history", "--ortperf-store=none"),
         "*--ortperf-baseline=history reads the results store, which --ortperf-store=none*"),
    ],
)  # fmt: skip
def test_bad_history_options_are_usage_errors(
    pytester: pytest.Pytester, args: tuple[str, ...], message: str
) -> None:
    pytester.makepyfile("def test_x():\n    pass\n")
    result = pytester.runpytest("-p", "no:cacheprovider", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([message])


def test_ini_keys_and_an_unknown_machine_prefix(pytester: pytest.Pytester) -> None:
    db = pytester.path / "results.sqlite"
    stored(db, [compare(0.9, 0)], at=T0)
    pytester.makepyfile("def test_x():\n    pass\n")
    pytester.makeini(
        f"[pytest]\nortperf_baseline = history\nortperf_store = {db}\nortperf_history_window = 2\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider")
    result.stderr.fnmatch_lines(["*ini ortperf_history_window must be from 5 to 1000*"])
    pytester.makeini(
        f"[pytest]\nortperf_baseline = history\nortperf_store = {db}\n"
        "ortperf_history_machine = ffffeeee\n"
    )
    result = pytester.runpytest("-p", "no:cacheprovider", "--ortperf")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        [f"*ini ortperf_history_machine: {db}: machine class 'ffffeeee' matches none "
         f"of the stored machine classes ({MACHINE}; `ortperf machines`*"]
    )  # fmt: skip
    prefix = MACHINE[:5]
    ok = pytester.runpytest("-p", "no:cacheprovider", "--ortperf", "-v",
                            f"--ortperf-history-machine={prefix}")  # fmt: skip
    ok.assert_outcomes(passed=1)
    ok.stdout.fnmatch_lines([f"*against the history of branch 'main' ({MACHINE}, last 10 runs)*"])
