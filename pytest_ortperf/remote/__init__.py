"""Remote: sessions in worker processes of other Python environments.

- ``sessions``: ``RemoteEnvironment`` and ``RemoteSession``, and their worker processes
- ``interleave``: remote sessions measured interleaved from here (ABBA rounds, process pairs)
- ``ab``: the ``ab()`` A/B of two environments, without pytest (``ortperf ab``)
- ``profiles``: profiles of remote sessions, the least disturbed of a few kept
- ``worker``: the worker process, driven over stdin/stdout
- ``venvs``: the Python environments workers run in (by requirement, or an existing one)
"""
