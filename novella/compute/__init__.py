"""The compute service: one per host, with its resource tracker and claims.

``SERVICE_VERSION`` is written to the host's ``services`` row; it goes up
whenever the compute RPC interface gains a method, so the conductor can tell
whether every host can take part in an operation (e.g. cross-cell moves).
"""

SERVICE_VERSION = 3  # 2: resize and cold migrate (prep_resize ... finish_revert_resize)
#                     3: cross-cell moves (the *_snapshot_based_resize_* methods)
MIN_VERSION_FOR_CROSS_CELL_MOVE = 3
