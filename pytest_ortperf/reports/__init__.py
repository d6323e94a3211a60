"""Reports of a run, all from one row model (:mod:`~pytest_ortperf.reports.rows`), in the
order of :class:`~pytest_ortperf.results.Outcome`, with the formatters of
:mod:`pytest_ortperf.units`.

- :mod:`~pytest_ortperf.reports.terminal`: the terminal summary and JUnit XML properties.
- :mod:`~pytest_ortperf.reports.html` (the page; its sections in ``html_sections``, its
  pieces and input in ``html_base``) and :mod:`~pytest_ortperf.reports.charts`: the
  self-contained HTML report and its PNG charts.
- :mod:`~pytest_ortperf.reports.json`: our JSON schema and pytest-benchmark's layout.
- :mod:`~pytest_ortperf.reports.markdown`: the CI summary.
- :mod:`~pytest_ortperf.reports.writer`: where the files go and writing them.
"""
