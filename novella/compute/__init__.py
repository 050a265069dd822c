"""The compute service: one per host, with its resource tracker and claims.

``SERVICE_VERSION`` is written to the host's ``services`` row; it goes up
whenever the compute RPC interface gains a method, so the conductor can tell
whether every host can take part in an operation (e.g. cross-cell moves).
"""

SERVICE_VERSION = 2  # 2: resize and cold migrate (prep_resize ... finish_revert_resize)
