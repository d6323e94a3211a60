"""Remote: sessions in worker processes of other Python environments.

- ``sessions``: ``RemoteEnvironment`` and ``RemoteSession``, measured interleaved from here
- ``worker``: the worker process, driven over stdin/stdout
- ``venvs``: the Python environments workers run in (by requirement, or an existing one)
"""
