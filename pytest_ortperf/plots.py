"""Profile plots, at the import path the README documents (they live in
:mod:`pytest_ortperf.profiling.plots`)."""

from pytest_ortperf.profiling.plots import plot_by_op, plot_compare, plot_timeline

__all__ = ["plot_by_op", "plot_compare", "plot_timeline"]
