import pytest

from novella.conductor.tasks.base import Task, TaskList


class Step(Task):
    def __init__(self, label, log, fail=False, fail_undo=False):
        self.label = label
        self.log = log
        self.fail = fail
        self.fail_undo = fail_undo

    @property
    def name(self):
        return self.label

    def execute(self):
        self.log.append(("execute", self.label))
        if self.fail:
            raise RuntimeError(f"{self.label} broke")

    def undo(self, exc):
        self.log.append(("undo", self.label, str(exc)))
        if self.fail_undo:
            raise RuntimeError("cannot undo")


def test_runs_every_task_in_order():
    log = []
    tl = TaskList("op", [Step("a", log), Step("b", log), Step("c", log)]).run()
    assert log == [("execute", "a"), ("execute", "b"), ("execute", "c")]
    assert tl.completed == ["a", "b", "c"] and tl.failed_task is None and tl.undone == []


def test_failure_undoes_completed_tasks_in_reverse_and_names_the_step():
    log = []
    tl = TaskList("op", [Step("a", log), Step("b", log), Step("c", log, fail=True), Step("d", log)])
    with pytest.raises(RuntimeError, match="c broke") as info:
        tl.run()
    assert info.value.failed_task == "c" and tl.failed_task == "c"
    assert log == [("execute", "a"), ("execute", "b"), ("execute", "c"),
                   ("undo", "b", "c broke"), ("undo", "a", "c broke")]
    assert tl.undone == ["b", "a"]


def test_a_failing_undo_does_not_stop_the_others():
    log = []
    tl = TaskList("op", [Step("a", log), Step("b", log, fail_undo=True), Step("c", log, fail=True)])
    with pytest.raises(RuntimeError, match="c broke"):
        tl.run()
    assert tl.undone == ["a"]
    assert [name for name, _ in tl.undo_errors] == ["b"]
    assert ("undo", "a", "c broke") in log


def test_default_name_is_the_class_name():
    class CreateThing(Task):
        def execute(self):
            pass
    assert CreateThing().name == "CreateThing"
    assert TaskList("op", [CreateThing()]).run().completed == ["CreateThing"]


class Route(Task):
    def __init__(self, log, then):
        self.log, self.then = log, then

    def execute(self):
        self.log.append(("execute", "route"))
        return self.then


def test_a_step_may_choose_the_steps_that_follow_it():
    log = []
    tl = TaskList("op", [Step("a", log), Route(log, [Step("b", log), Step("c", log)]),
                         Step("d", log)]).run()
    assert tl.completed == ["a", "Route", "b", "c", "d"]
    assert [entry[1] for entry in log] == ["a", "route", "b", "c", "d"]


def test_chosen_steps_are_undone_like_the_others():
    log = []
    tl = TaskList("op", [Step("a", log), Route(log, [Step("b", log), Step("c", log, fail=True)])])
    with pytest.raises(RuntimeError):
        tl.run()
    assert tl.undone == ["b", "Route", "a"]


def test_nothing_up_to_a_completed_step_of_no_return_is_undone():
    log = []
    past = Step("past", log)
    past.no_return = True
    tl = TaskList("op", [Step("a", log), past, Step("b", log), Step("c", log, fail=True)])
    with pytest.raises(RuntimeError):
        tl.run()
    assert tl.undone == ["b"]
    failing = Step("late", log, fail=True)
    failing.no_return = True  # it failed: it never completed, so the rest is undone
    tl = TaskList("op", [Step("a", log), failing])
    with pytest.raises(RuntimeError):
        tl.run()
    assert tl.undone == ["a"]


class RecordedJournal:
    """A Journal whose writes are kept in a list instead of the database."""

    def __new__(cls):
        import json

        from novella.conductor.journal import Journal

        class Kept(Journal):
            def _write(self, **values):
                self.written.append(json.loads(values["steps"]))
                self._written, self._pending = dict(values), False

        journal = Kept(None, "me", 60, "op", "uuid", None, type("S", (), {"record": dict})())
        journal.written = []
        return journal


class Idle(Step):
    def acts(self):
        return False


def test_the_start_of_a_step_that_changes_nothing_is_written_with_the_next_boundary():
    log = []
    journal = RecordedJournal()
    TaskList("op", [Step("a", log), Idle("b", log), Step("c", log)], journal=journal).run()
    assert journal.written == [
        [["a", "started"]],
        [["a", "done"], ["b", "done"], ["c", "started"]],
        [["a", "done"], ["b", "done"], ["c", "done"]],
    ]
    assert log == [("execute", "a"), ("execute", "b"), ("execute", "c")]


def test_a_step_that_changes_nothing_and_fails_is_recorded_failed_then_undone():
    log = []
    journal = RecordedJournal()
    with pytest.raises(RuntimeError):
        TaskList("op", [Step("a", log), Idle("b", log, fail=True)], journal=journal).run()
    assert journal.written[0] == [["a", "started"]]
    assert journal.written[1] == [["a", "done"], ["b", "failed"]]
    assert journal.written[-1] == [["a", "undone"], ["b", "failed"]]
