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
    """``value`` as JSON, strictly: what is saved comes back equal after a recovery,
    so a value JSON cannot hold (a datetime, a UUID, a set...) is refused as it is
    saved (TypeError naming its key), to be converted where it is made."""
    try:
        return json.dumps(value, sort_keys=True)
    except (TypeError, ValueError) as exc:
        keys = [key for key, item in value.items() if not _encodes(item)] if isinstance(
            value, dict) else []
        raise TypeError(f"the journal cannot save {', '.join(map(repr, keys)) or 'a value'}: "
                        f"{exc}") from exc


def _encodes(value):
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def decode(text):
    return json.loads(text)
