"""The progress line `novella drain` prints (novella/cmd/progress.py)."""
import io

from novella.cmd import progress


class Tty(io.StringIO):
    def isatty(self):
        return True


def test_render_bar_counts_and_failures():
    assert progress.render(12, 50, 1) == "[####x...............] 12/50 servers moved, 1 failed"
    assert progress.render(0, 50) == "[....................] 0/50 servers moved"
    assert progress.render(50, 50) == "[####################] 50/50 servers moved"
    # one failure among many still shows in the bar; the bar never overflows
    assert progress.render(999, 1000, 1, width=10) == "[#########x] 999/1000 servers moved, 1 failed"
    assert progress.render(60, 50, 5, width=10) == "[##########] 60/50 servers moved, 5 failed"
    # an empty plan is complete
    assert progress.render(0, 0, noun="actions", verb="done") == "[####################] 0/0 actions done"


def test_terminal_redraws_one_line():
    out = Tty()
    bar = progress.Progress(total=4, stream=out, width=4)
    bar.update(1)
    bar.update(1)
    bar.update(3, failed=1)
    bar.finish()
    bar.finish()   # a second finish adds nothing
    assert out.getvalue() == ("\r[#...] 1/4 servers moved\x1b[K"
                              "\r[#...] 1/4 servers moved\x1b[K"
                              "\r[###x] 3/4 servers moved, 1 failed\x1b[K\n")


def test_pipe_gets_plain_lines_once_per_change():
    out = io.StringIO()
    bar = progress.Progress(total=3, stream=out)
    for done, failed in ((0, 0), (1, 0), (1, 0), (2, 1)):
        bar.update(done, failed)
    bar.update(2, 1, total=4)   # the plan grew: a new line
    bar.finish()
    assert out.getvalue().splitlines() == [
        "0/3 servers moved", "1/3 servers moved", "2/3 servers moved, 1 failed",
        "2/4 servers moved, 1 failed"]
    assert "\r" not in out.getvalue() and "\x1b" not in out.getvalue()
