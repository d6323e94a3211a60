"""scikit-learn models converted with skl2onnx (the ``benchmarks`` extra).

Two things an exporter's options or ORT's optimizer change: what ZipMap costs on a
classifier's probabilities, and what graph optimization buys a converted KMeans. Both also
check that the candidate computes the same thing as the reference.
"""

import numpy as np
import pytest

skl2onnx = pytest.importorskip("skl2onnx")
sklearn_linear = pytest.importorskip("sklearn.linear_model")
sklearn_cluster = pytest.importorskip("sklearn.cluster")


@pytest.fixture(scope="module")
def iris_like():
    """300 rows of 4 features and 3 classes, like the iris data set (no download)."""
    rng = np.random.default_rng(0)
    X = rng.standard_normal((300, 4)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(np.int64) + (X[:, 2] > 1)
    return X, y


def test_logistic_regression_zipmap_cost(ort_session, ort_feeds, ortperf, iris_like):
    """ZipMap turns probabilities into a list of dicts: reference without it, candidate with.
    The outputs differ in type, so the output check is done here, by hand."""
    X, y = iris_like
    model = sklearn_linear.LogisticRegression(max_iter=500).fit(X, y)
    with_zipmap = skl2onnx.to_onnx(model, X[:1], options={"zipmap": True})
    without = skl2onnx.to_onnx(model, X[:1], options={"zipmap": False})
    reference = ort_session(without, name="logreg")
    candidate = ort_session(with_zipmap, name="logreg+zipmap")
    feeds = ort_feeds(reference, shapes={"X": (64, 4)})
    result = ortperf.compare(
        reference, candidate, feeds, api="run", check_outputs=False, name="zipmap_cost"
    )
    print(f"\nwith ZipMap / without: {result.ratio:.3f} [{result.low:.3f}, {result.high:.3f}]")
    np.testing.assert_allclose(
        np.array([[d[k] for k in sorted(d)] for d in candidate.run(feeds)[1]]),
        reference.run(feeds)[1],
        rtol=1e-5,
    )


def test_kmeans_converted(ort_session, ort_feeds, ortperf, iris_like):
    """scikit-learn's KMeans through skl2onnx, graph optimization on vs off; the ONNX labels
    equal scikit-learn's."""
    X, _ = iris_like
    model = sklearn_cluster.KMeans(n_clusters=8, n_init=2, random_state=0).fit(X)
    onx = skl2onnx.to_onnx(model, X[:1])
    reference = ort_session(onx, optimization="disable", name="kmeans-skl")
    candidate = ort_session(onx, name="kmeans-skl")
    feeds = ort_feeds(reference, shapes={"X": (256, 4)})
    result = ortperf.compare(reference, candidate, feeds, name="skl_kmeans_optimized")
    print(f"\noptimized/disabled {result.ratio:.3f} [{result.low:.3f}, {result.high:.3f}]")
    labels = candidate.run(feeds)[0]
    np.testing.assert_array_equal(labels, model.predict(feeds["X"]))
