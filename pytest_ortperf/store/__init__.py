"""The results store: every ``--ortperf`` run, its environment and measurements, in SQL.

- ``secrets``: credentials masked in store URLs and messages (pure text)
- ``errors``: ``StoreError`` and its kinds, ``StorePath`` (pure Python)
- ``schema``: tables, schema version and migrations, the samples' encoding
- ``location``: where the store is (option, ``$ORTPERF_STORE``, the default file; pure
  Python, so a run that stores nothing never imports SQLAlchemy)
- ``connection``: opening a store: paths, URLs, SQLAlchemy's engine, one transaction,
  the connect-timeout breaker
- ``write``: ``save_run`` (records to rows, one transaction per run) and ``prune``
- ``decode``: stored values back to Python (JSON, samples, times, records); a damaged one
  is a StoreError naming its row and column
- ``read``: ``read_results``, ``list_runs``, ``resolve_run_id``, ``read_profiles``,
  ``load_records``
- ``history``: values over runs for the reports, ``run_medians`` for the history gate,
  ``branch_records`` for history baselines
- ``spool``: runs the store could not take, kept in local files until it can
- ``artifacts``: the content-addressed artifact store of model bytes (a directory);
  ``artifacts_sql``: the same inside the results store

Import from the module that holds a name; this package imports nothing. Names with a
leading underscore are shared between the modules of the store and used nowhere else.
"""
