"""The layout of baseline files (schema 3): reviewable summaries in ``<module>.json``, raw
numbers in ``<module>.samples.json``; schema 2 files still load and are migrated."""

from __future__ import annotations

import difflib
import json
import random
from pathlib import Path
from typing import Any

import pytest
from test_gating_baseline import ENV, compare_record, latency_record

from pytest_ortperf import files
from pytest_ortperf.gating import baseline
from pytest_ortperf.gating.baseline import (
    RAW_FIELDS,
    BaselineError,
    baseline_path,
    load_baseline,
    samples_path,
    update_baseline,
    write_baseline,
)
from pytest_ortperf.gating.baseline_entries import entry_from_record, round_floats

MODULE = "tests/test_models.py"


def measured(seed: int, n: int = 1000) -> dict[str, dict[str, Any]]:
    """Entries of an unchanged model measured again: same distributions, new numbers
    (``n`` samples and block ratios, as a real update records)."""
    rng = random.Random(seed)
    ratios = [rng.gauss(0.9, 0.01) for _ in range(n)]
    samples = [rng.gauss(1.2e-3, 2e-5) for _ in range(n)]
    records = {
        "test_fused::cmp": compare_record(ratios, test="test_fused"),
        "test_fused::lat": latency_record(samples, test="test_fused"),
        "test_norm::lat": latency_record(samples, test="test_norm", control=[1e-4] * n),
    }
    return {
        key: entry_from_record(record, ENV, updated=f"2026-01-0{seed}")
        for key, record in records.items()
    }


def changed_lines(old: str, new: str) -> int:
    """Lines removed or added by the change, as ``git diff`` counts them."""
    diff = difflib.unified_diff(old.splitlines(), new.splitlines(), lineterm="", n=0)
    return sum(1 for line in diff if line[:1] in "+-" and not line.startswith(("+++", "---")))


def test_a_refresh_of_an_unchanged_model_changes_a_few_short_lines(tmp_path: Path) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    write_baseline(path, measured(1))
    old, old_raw = path.read_text(), samples_path(path).read_text()
    write_baseline(path, measured(2))
    new, new_raw = path.read_text(), samples_path(path).read_text()
    entries = load_baseline(path).entries
    assert dict(entries) == round_floats(measured(2))
    # Per entry: median(s)/ratio/interval, the date and the digest; no raw number.
    summary_changes = changed_lines(old, new)
    assert summary_changes <= 2 * 8 * len(entries), summary_changes
    for field in RAW_FIELDS:
        assert f'"{field}"' not in new
    longest = max(len(line) for text in (new, new_raw) for line in text.splitlines())
    assert longest <= 120, longest
    # The raw numbers changed, in their own file; nothing of the old ones is left.
    assert changed_lines(old_raw, new_raw) > 100
    assert json.loads(new_raw)["raw"].keys() == entries.keys()
    assert all(len(versions) == 1 for versions in json.loads(new_raw)["raw"].values())
    print(
        f"\nrefresh of 3 entries of 1000 numbers: {summary_changes} lines changed in "
        f"{path.name}, {changed_lines(old_raw, new_raw)} in {samples_path(path).name}; "
        f"longest line {longest} characters"
    )


def schema2_text(entries: dict[str, dict[str, Any]]) -> str:
    """A file as pytest-ortperf wrote schema 2: raw numbers inline."""
    return json.dumps({"schema": 2, "entries": round_floats(entries)}, indent=2) + "\n"


def test_schema_2_files_load_and_the_next_update_migrates_them(tmp_path: Path) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    path.parent.mkdir()
    old = measured(1, n=30)
    path.write_text(schema2_text(old))
    loaded = load_baseline(path)
    assert loaded.schema == 2 and dict(loaded.entries) == round_floats(old)
    nodeid = f"{MODULE}::test_new"
    record = {**latency_record([1e-3] * 30, test=nodeid), "gated": True}
    plan = update_baseline(
        path, MODULE, [record], ENV, passed={nodeid}, collected={nodeid}, partial=True
    )
    assert not plan.failed
    migrated = load_baseline(path)
    assert migrated.schema == 3
    assert set(migrated.entries) == {*old, "test_new::lat"}
    for key, entry in round_floats(old).items():
        assert migrated.entries[key] == entry, key
    assert "samples" not in path.read_text()
    assert sorted(p.name for p in path.parent.iterdir()) == [
        "test_models.json",
        "test_models.samples.json",
    ]


def test_a_missing_or_edited_samples_file_is_named(tmp_path: Path) -> None:
    path = baseline_path(tmp_path / "test_models.py")
    write_baseline(path, measured(1, n=20))
    samples = samples_path(path)
    text = samples.read_text()
    data = json.loads(text)
    digest = next(iter(data["raw"]["test_fused::lat"]))
    data["raw"]["test_fused::lat"][digest]["samples"][0] = 9.0  # a hand edit
    samples.write_text(json.dumps(data))
    with pytest.raises(BaselineError) as info:
        load_baseline(path)
    message = str(info.value)
    assert str(samples) in message and "'test_fused::lat'" in message
    assert "do not match their digest" in message
    samples.unlink()
    with pytest.raises(BaselineError, match=r"test_models\.samples\.json: missing; .*restore"):
        load_baseline(path)
    samples.write_text(text.replace(digest, "0" * 12))
    with pytest.raises(BaselineError, match=f"no raw numbers for digest '{digest}'"):
        load_baseline(path)
    samples.write_text(json.dumps({"schema": 3, "raw": {"x": [1, 2]}}))
    with pytest.raises(BaselineError, match=r"samples\.json: 'raw' must map"):
        load_baseline(path)
    samples.write_text(text)
    bad = json.loads(path.read_text())
    bad["entries"]["test_fused::lat"]["n"] = -1  # the validator still names file/entry/field
    path.write_text(json.dumps(bad))
    with pytest.raises(
        BaselineError, match=r"test_models\.json: entry 'test_fused::lat': field 'n'"
    ):
        load_baseline(path)


def test_an_update_keeps_the_old_raw_numbers_until_the_new_file_names_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The three writes of an update, stopped after the second: the samples file still
    holds the old version beside the new, the next write drops the old one."""
    path = baseline_path(tmp_path / "test_models.py")
    write_baseline(path, measured(1, n=20))
    real = files.write_atomic
    calls: list[str] = []

    def stop_after_two(target: Path, text: str, **kwargs: Any) -> None:
        calls.append(Path(target).name)
        if len(calls) == 3:
            raise OSError("disk full")
        real(target, text, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(baseline, "write_atomic", stop_after_two)
        with pytest.raises(OSError, match="disk full"):
            write_baseline(path, measured(2, n=20))
    assert calls == ["test_models.samples.json", "test_models.json", "test_models.samples.json"]
    assert dict(load_baseline(path).entries) == round_floats(measured(2, n=20))
    raw = json.loads(samples_path(path).read_text())["raw"]
    assert all(len(versions) == 2 for versions in raw.values())
    write_baseline(path, measured(3, n=20))
    raw = json.loads(samples_path(path).read_text())["raw"]
    assert all(len(versions) == 1 for versions in raw.values())
    write_baseline(path, {})
    assert not path.parent.exists()
