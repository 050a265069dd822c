"""The task framework every conductor operation is written in.

A Task is one step of an operation: ``execute()`` does it; ``undo(exc)``
takes back what a *completed* execute() did when a later step fails (``exc``
is why). A step that fails takes back its own half-done work before raising.
A TaskList runs its tasks in order; when one raises, the completed ones are
undone newest first and the exception propagates, carrying the name of the
step that failed. An operation is a list of task instances, so what it does,
in which order and what each step undoes is read in one place:

    TaskList("build", [ClaimedAllocation(build), CreateInstanceInCell(build), ...]).run()

Tasks of one operation share a plain state object (passed to each
constructor) through which a step hands its results to the next.

Two kinds of step shape the list as it runs:

- a step whose ``execute()`` returns tasks has them run next (a route: which
  steps follow depends on what an earlier step found, such as the cell the
  scheduler chose);
- a step with ``no_return = True`` is the point of no return: once it has
  completed, the operation only goes forward and nothing up to it is undone.

A list that only goes forward (``forward=True``: confirm, revert) does not
fail when a host does not answer one of its steps: it raises ``Unfinished``
and leaves its journal to a conductor that carries it on later, once the
host answers again (the operation's lease is given up at once).

Given a journal (novella/conductor/journal.py), the list records each step as
started before it acts, done after it, and undoing/undone around its undo,
so that a conductor that dies anywhere leaves in the database exactly where
the operation stands. ``recover`` (novella/conductor/operations.py) is how a
fresh conductor carries on from there: forward from the
first step not done, or back through every step that started.
"""
import logging

from novella import rpc

LOG = logging.getLogger(__name__)


class Task:
    """One step of an operation."""

    no_return = False

    def acts(self):
        """Whether execute() would change anything now. A step that would not (a
        group step for a server in no group) has its start recorded with the next
        boundary instead of on its own: there is nothing it could leave half done."""
        return True

    def settled(self):
        """Whether this step's effect is there though its end was never recorded
        (asked by a fresh conductor of a step of no return its owner died in)."""
        return False

    @property
    def name(self):
        return type(self).__name__

    def execute(self):
        """Do the step; may return the tasks that come next."""
        raise NotImplementedError

    def undo(self, exc):
        """Take back what execute() did; ``exc`` is why the operation failed."""


class Unfinished(Exception):
    """A forward-only operation waits for a host that did not answer."""


class TaskList:
    def __init__(self, name, tasks, journal=None, forward=False):
        self.name = name
        self.tasks = list(tasks)
        self.journal = journal
        self.forward = forward
        self.completed = []       # names of the tasks whose execute() returned
        self.undone = []          # names, in the order they were undone
        self.undo_errors = []     # (task name, exception) of undos that failed
        self.failed_task = None

    def run(self, start=0):
        """Execute every task (from index ``start``, the ones before it being done);
        on failure undo the completed ones, newest first, and re-raise."""
        done = []
        committed = False  # a step of no return completed
        for index, task in enumerate(self.tasks[:start]):
            done = [] if task.no_return else done + [(index, task)]
            committed = committed or task.no_return
        index = start
        while index < len(self.tasks):
            task = self.tasks[index]
            self._boundary(index, task, "started")
            try:
                following = task.execute()
            except BaseException as exc:
                if not isinstance(exc, Exception):
                    raise  # the process is going away: nothing more is written
                if self.forward and self.journal is not None and isinstance(exc, rpc.Timeout):
                    LOG.warning("%s: step %s waits for its host: %s", self.name, task.name,
                                exc)
                    self.journal.release()
                    raise Unfinished(f"{self.name}: {task.name} waits for its host") from exc
                self.failed_task = task.name
                LOG.info("%s: step %s failed: %s", self.name, task.name, exc)
                self._boundary(index, task, "failed")
                self._undo(done, exc)
                self._end("failed" if committed else "undone")
                exc.failed_task = task.name
                raise
            if following:
                self.tasks[index + 1:index + 1] = following
            self._boundary(index, task, "done")
            done = [] if task.no_return else done + [(index, task)]
            committed = committed or task.no_return
            self.completed.append(task.name)
            index += 1
        self._end("done")
        return self

    def started(self, index):
        """Step ``index`` is about to act outside ``run`` (for all lists of a request at
        once, such as the scheduler's claims): recorded as started first."""
        self._boundary(index, self.tasks[index], "started")

    def undo(self, steps, exc):
        """Undo ``steps`` ((index, task) pairs a dead conductor had started), newest first."""
        self._undo(steps, exc)
        self._end("undone")

    def _undo(self, done, exc):
        for index, task in reversed(done):
            try:
                self._boundary(index, task, "undoing")
                task.undo(exc)
                self._boundary(index, task, "undone")
                self.undone.append(task.name)
            except Exception as undo_exc:  # noqa: BLE001 - undo the others regardless
                LOG.exception("%s: undo of %s failed", self.name, task.name)
                self.undo_errors.append((task.name, undo_exc))

    def _boundary(self, index, task, status):
        """Step ``index`` is now ``status``: recorded before it acts and after."""
        if self.journal is not None:
            self.journal.step(index, task.name, status,
                              write=status != "started" or task.acts())

    def _end(self, status):
        if self.journal is not None:
            self.journal.end(status)
