"""A server is listed exactly once from the moment its create answers.

The builds of a multiple create are paused at every step boundary of the
conductor; a listing runs at each pause, and a build step is let run in the
middle of the listing as well: after it read the build requests, after it
read the cells, and before it looks up a server the cells did not show.
"""
import threading

import pytest

from novella.api.compute import instances
from novella.conductor.tasks import base
from tests.functional.moves.conftest import make_cloud  # noqa: F401 - fixture


class Lockstep:
    """The conductor stops at each step boundary until the test lets it go on."""

    def __init__(self):
        self.cv = threading.Condition()
        self.arrivals = 0      # boundaries reached
        self.credits = 0       # boundaries the conductor may pass
        self.released = False
        self.running = 0       # builds started and not ended

    def started(self):
        with self.cv:
            self.running += 1

    def ended(self):
        with self.cv:
            self.running -= 1
            self.cv.notify_all()

    def boundary(self):
        with self.cv:
            if self.released:
                return
            self.arrivals += 1
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.credits or self.released)
            if self.credits:
                self.credits -= 1

    def step(self, timeout=120):
        """Let the conductor run to its next boundary: False when the builds ended."""
        with self.cv:
            seen = self.arrivals
            self.credits += 1
            self.cv.notify_all()
            self.cv.wait_for(lambda: self.arrivals > seen or not self.running, timeout)
            return self.arrivals > seen

    def reached(self, count, timeout=120):
        """Wait until ``count`` boundaries were reached."""
        with self.cv:
            return self.cv.wait_for(lambda: self.arrivals >= count, timeout)

    def release(self):
        with self.cv:
            self.released = True
            self.cv.notify_all()


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=2)


@pytest.fixture
def paused(cloud, monkeypatch):
    """(lockstep, middle): the builds stop at every step boundary; a listing lets the
    builds take ``middle["span"]`` steps at ``middle["phase"]`` of itself."""
    lockstep = Lockstep()
    real_init, real_boundary, real_end = (base.TaskList.__init__, base.TaskList._boundary,
                                          base.TaskList._end)

    def init(self, name, *args, **kwargs):
        real_init(self, name, *args, **kwargs)
        if name.startswith("build "):
            lockstep.started()

    def boundary(self, index, task, status):
        real_boundary(self, index, task, status)
        if self.name.startswith("build "):
            lockstep.boundary()

    def end(self, status):
        real_end(self, status)
        if self.name.startswith("build "):
            lockstep.ended()
    monkeypatch.setattr(base.TaskList, "__init__", init)
    monkeypatch.setattr(base.TaskList, "_boundary", boundary)
    monkeypatch.setattr(base.TaskList, "_end", end)

    middle = {"phase": None, "span": 1, "moved": None}  # moved: None when no step was asked

    def steps(phase):
        if middle["phase"] == phase:
            middle["moved"] = all([lockstep.step() for _ in range(middle["span"])])

    real_scatter = instances.cells_mod.scatter

    def scatter(cells, fn):  # the listing read the build requests; then the cells
        steps("before cells")
        out = real_scatter(cells, fn)
        steps("after cells")
        return out
    monkeypatch.setattr(instances.cells_mod, "scatter", scatter)
    real_load = instances.load

    def load(*args, **kwargs):  # a server the cells did not show is looked up again
        steps("before lookup")
        return real_load(*args, **kwargs)
    monkeypatch.setattr(instances, "load", load)
    yield lockstep, middle
    lockstep.release()
    cloud.aio.wait_idle()


def _walk(cloud, lockstep, middle, name, phases, span=1, offset=0):
    """A multiple create of two servers, then a listing at every pause of its
    builds (and with ``span`` steps taken inside it at each of ``phases``), the
    first ``offset`` steps taken without one; each lists both servers once."""
    project = f"{name}:{name}-project"
    lockstep.released, lockstep.credits = False, 0
    first = lockstep.arrivals
    status, body = cloud.api("POST", "/servers", {"server": {
        "name": name, "flavorRef": "1", "imageRef": cloud.aio.demo_image["id"],
        "networks": "none", "min_count": 2}}, token=project)
    assert status == 202, body
    assert lockstep.reached(first + 1)  # the builds stopped at their first boundary
    seen, moved = [], all([lockstep.step() for _ in range(offset)])
    while moved:
        for phase in phases:
            middle.update(phase=phase, span=span, moved=None)
            status, listed = cloud.api("GET", "/servers", token=project)
            middle["phase"] = None
            assert status == 200
            names = sorted(s["name"] for s in listed["servers"])
            seen.append((lockstep.arrivals - first, phase, names))
            assert names == [f"{name}-1", f"{name}-2"], seen
            moved = moved and middle["moved"] is not False  # False: the builds ended
        moved = moved and lockstep.step()
    lockstep.release()
    cloud.aio.wait_idle()
    assert lockstep.arrivals - first > 10  # every step of both builds was passed
    assert sorted(cloud.server(s["id"])["status"] for s in listed["servers"]) == ["ACTIVE"] * 2


def test_each_server_of_a_multiple_create_is_listed_once_at_every_step(cloud, paused):
    lockstep, middle = paused
    _walk(cloud, lockstep, middle, "twin",
          (None, "before cells", "after cells", "before lookup"))


@pytest.mark.parametrize("offset", range(4))
def test_a_server_reaching_its_cell_during_a_listing_is_listed_once(cloud, paused, offset):
    """Four steps (a server created in its cell, then mapped there and its build
    request gone) taken while the listing reads the cells, at every alignment."""
    lockstep, middle = paused
    _walk(cloud, lockstep, middle, f"pair{offset}", ("before cells", "after cells"),
          span=4, offset=offset)
