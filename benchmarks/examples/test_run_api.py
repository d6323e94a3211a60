"""The ways to call onnxruntime, on a tiny linear regression: ``ortperf.api_sweep`` measures
the same model through every run API (``run``, the C-level ``run``, ``run_with_ort_values``
and three IOBinding variants, see ``pytest_ortperf.measuring.calls``) interleaved, and returns a
table sorted by median with each API's ratio to the fastest.

On a model this small the call overhead dominates, so the choice of API shows clearly.
"""

from pytest_ortperf import models
from pytest_ortperf.measuring.calls import APIS


def test_run_api_sweep(ort_session, ort_feeds, ortperf, record_property):
    """One row per run API; the table is printed (``-s``) and kept as a test property."""
    session = ort_session(models.linear_regression(features=10))
    feeds = ort_feeds(session, dims={"N": 1})
    table = ortperf.api_sweep(session, feeds)
    print("\n" + table[["variant", "median", "iqr", "n", "ratio_to_fastest"]].to_string())
    record_property(
        "api_sweep", table[["variant", "median", "ratio_to_fastest"]].to_dict("records")
    )
    # Every API was measured once. IOBinding without copies usually comes first and run()
    # with its conversions later, but the order is a measurement: it is shown, not asserted.
    assert sorted(table["variant"]) == sorted(APIS)
