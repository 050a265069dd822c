"""The task framework every conductor operation is written in.

A Task is one step: ``execute()`` does it, ``rollback(exc)`` undoes it. A
TaskList runs its tasks in order; when one raises, the tasks that completed
are rolled back in reverse order and the exception propagates, carrying the
name of the step that failed. An operation is a list of task instances, so
what it does, in which order and what each step undoes is read in one place:

    TaskList("build", [ClaimedAllocation(b), CreateInstanceInCell(b), ...]).run()

Tasks of one operation share a plain state object (passed to each
constructor) through which a step hands its results to the next.
"""
import logging

LOG = logging.getLogger(__name__)


class Task:
    """One step of an operation."""

    @property
    def name(self):
        return type(self).__name__

    def execute(self):
        raise NotImplementedError

    def rollback(self, exc):
        """Undo what execute() did; ``exc`` is why the operation failed."""


class TaskList:
    def __init__(self, name, tasks):
        self.name = name
        self.tasks = list(tasks)
        self.completed = []       # names of the tasks whose execute() returned
        self.rolled_back = []     # names, in the order they were undone
        self.rollback_errors = []  # (task name, exception) of rollbacks that failed
        self.failed_task = None

    def run(self):
        """Execute every task; on failure undo the completed ones, newest first, and re-raise."""
        done = []
        for task in self.tasks:
            try:
                task.execute()
            except BaseException as exc:
                self.failed_task = task.name
                LOG.info("%s: step %s failed: %s", self.name, task.name, exc)
                self._rollback(done, exc)
                exc.failed_task = task.name
                raise
            done.append(task)
            self.completed.append(task.name)
        return self

    def _rollback(self, done, exc):
        for task in reversed(done):
            try:
                task.rollback(exc)
                self.rolled_back.append(task.name)
            except Exception as rb_exc:  # noqa: BLE001 - undo the others regardless
                LOG.exception("%s: rollback of %s failed", self.name, task.name)
                self.rollback_errors.append((task.name, rb_exc))
