"""The results store: every ``--ortperf`` run, its environment and measurements, in SQL.

- ``db``: credentials, schema, connection, writing, reading and history
- ``spool``: runs the store could not take, kept in local files until it can
"""
