"""How a journal row stores what an operation carries: JSON, strictly.

Both journals of in-flight work write their steps and state with these: the
conductor's (novella/conductor/journal.py, the API database's
``operations``) and the compute hosts' (novella/db/host_operations.py, a
cell database's ``host_operations``). A value that is not JSON raises as it
is written, rather than coming back from a recovery as a different thing
(a string), and keys are sorted so the same state is the same text.
"""
import json

STARTED, DONE = "started", "done"  # a step's status


def encode(value):
    """``value`` as the text a journal stores; TypeError if it is not JSON."""
    return json.dumps(value, sort_keys=True)


def decode(text):
    return json.loads(text)
