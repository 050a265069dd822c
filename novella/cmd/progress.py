"""A progress line for commands that follow a long operation (`novella drain`).

    from novella.cmd.progress import Progress

    bar = Progress(total=50)                 # noun="servers", verb="moved", stream=sys.stdout
    for plan in follow(...):                 # however the command polls
        bar.update(done=12, failed=1)        # [####x...............] 12/50 servers moved, 1 failed
    bar.finish()                             # ends the line (a terminal's) once

On a terminal the line is redrawn in place; anywhere else (a pipe, a log
file, CI) every update whose counts changed prints one plain line, so a log
shows each step once and no control characters. ``render()`` is the text
alone, for callers that print it themselves.
"""
import sys

WIDTH = 20


def render(done, total, failed=0, noun="servers", verb="moved", width=WIDTH):
    """``[####x...] 12/50 servers moved, 1 failed``: ``#`` done, ``x`` failed, ``.`` left."""
    total = max(int(total), 0)
    done, failed = max(int(done), 0), max(int(failed), 0)
    if total:
        cells_done = min(width, done * width // total)
        cells_failed = min(width - cells_done, -(-failed * width // total))  # a failure shows
    else:
        cells_done, cells_failed = width, 0
    bar = "#" * cells_done + "x" * cells_failed + "." * (width - cells_done - cells_failed)
    text = f"[{bar}] {done}/{total} {noun} {verb}"
    return text + (f", {failed} failed" if failed else "")


def plain(done, total, failed=0, noun="servers", verb="moved"):
    """The same counts without the bar, for logs."""
    return f"{done}/{total} {noun} {verb}" + (f", {failed} failed" if failed else "")


class Progress:
    """Writes the progress of ``total`` items to ``stream`` (a bar on a terminal)."""

    def __init__(self, total, noun="servers", verb="moved", stream=None, width=WIDTH):
        self.total = total
        self.noun, self.verb, self.width = noun, verb, width
        self.stream = stream if stream is not None else sys.stdout
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self.last = None
        self.open_line = False

    def update(self, done, failed=0, total=None):
        if total is not None:
            self.total = total
        counts = (done, failed, self.total)
        if self.tty:
            # \r back to the line's start, \x1b[K clears what a longer line left
            line = render(done, self.total, failed, self.noun, self.verb, self.width)
            self.stream.write("\r" + line + "\x1b[K")
            self.open_line = True
        elif counts != self.last:
            self.stream.write(plain(done, self.total, failed, self.noun, self.verb) + "\n")
        self.last = counts
        self.stream.flush()

    def finish(self):
        if self.open_line:
            self.stream.write("\n")
            self.stream.flush()
            self.open_line = False
