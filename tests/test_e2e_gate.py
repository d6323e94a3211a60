"""End to end with real sessions and real timing: a baseline for an attention block whose
candidate ORT fuses, then a candidate that cannot be fused and one ~35% slower.

The slow candidate widens the projections with zero columns: the same outputs and the same
optimized structure, twice the inner dimension. The margins (35% against a 5% threshold,
a deterministic structure check) keep these independent of the machine's speed. The test is
strict: on a machine so overloaded that the ratio comes out inconclusive (seen with four
busy processes on two cores), the slower candidate still fails, as CI would want.
"""

import json

INNER = """
import json, pathlib
import pytest
from pytest_ortperf import models

VARIANT = json.loads(pathlib.Path(__file__).with_name("variant.json").read_text())


@pytest.mark.ortperf(budget=0.5, strict=True)
def test_attention(ort_session, ort_feeds, ortperf):
    reference = ort_session(models.attention(), optimization="disable")
    candidate = ort_session(models.attention(**VARIANT))
    feeds = ort_feeds(reference, dims={"B": 4})
    ortperf.compare(reference, candidate, feeds, name="attention", check_outputs=VARIANT.get("fusable", True))
"""

RUN = ("-p", "no:cacheprovider", "--ortperf-store=none")


def run_variant(pytester, *args, **variant):
    (pytester.path / "variant.json").write_text(json.dumps(variant))
    return pytester.runpytest(*RUN, *args)


def test_baseline_then_lost_fusion_then_slower_candidate(pytester):
    pytester.makepyfile(test_block=INNER)
    taken = run_variant(pytester, "--ortperf-update")
    taken.assert_outcomes(passed=1)
    entry = json.loads((pytester.path / "__ortperf__" / "test_block.json").read_text())["entries"][
        "test_attention::attention"
    ]
    assert entry["op_histograms"]["candidate"]["FusedMatMul"] == 1

    unfused = run_variant(pytester, "--ortperf", fusable=False)
    unfused.assert_outcomes(failed=1)
    unfused.stdout.fnmatch_lines(
        ["*FAIL structure: candidate lost fusion: FusedMatMul 1 -> 0*Transpose 0 -> 1*"]
    )

    slower = run_variant(pytester, "--ortperf", zero_pad=32)
    slower.assert_outcomes(failed=1)
    slower.stdout.fnmatch_lines(["*FAIL ratio: ratio * vs baseline *: +*-> *"])
    assert "structure unchanged" in slower.stdout.str()
