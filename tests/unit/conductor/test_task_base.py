import pytest

from novella.conductor.tasks.base import Task, TaskList


class Step(Task):
    def __init__(self, label, log, fail=False, fail_rollback=False):
        self.label = label
        self.log = log
        self.fail = fail
        self.fail_rollback = fail_rollback

    @property
    def name(self):
        return self.label

    def execute(self):
        self.log.append(("execute", self.label))
        if self.fail:
            raise RuntimeError(f"{self.label} broke")

    def rollback(self, exc):
        self.log.append(("rollback", self.label, str(exc)))
        if self.fail_rollback:
            raise RuntimeError("cannot undo")


def test_runs_every_task_in_order():
    log = []
    tl = TaskList("op", [Step("a", log), Step("b", log), Step("c", log)]).run()
    assert log == [("execute", "a"), ("execute", "b"), ("execute", "c")]
    assert tl.completed == ["a", "b", "c"] and tl.failed_task is None and tl.rolled_back == []


def test_failure_rolls_back_completed_tasks_in_reverse_and_names_the_step():
    log = []
    tl = TaskList("op", [Step("a", log), Step("b", log), Step("c", log, fail=True), Step("d", log)])
    with pytest.raises(RuntimeError, match="c broke") as info:
        tl.run()
    assert info.value.failed_task == "c" and tl.failed_task == "c"
    assert log == [("execute", "a"), ("execute", "b"), ("execute", "c"),
                   ("rollback", "b", "c broke"), ("rollback", "a", "c broke")]
    assert tl.rolled_back == ["b", "a"]


def test_a_failing_rollback_does_not_stop_the_others():
    log = []
    tl = TaskList("op", [Step("a", log), Step("b", log, fail_rollback=True), Step("c", log, fail=True)])
    with pytest.raises(RuntimeError, match="c broke"):
        tl.run()
    assert tl.rolled_back == ["a"]
    assert [name for name, _ in tl.rollback_errors] == ["b"]
    assert ("rollback", "a", "c broke") in log


def test_default_name_is_the_class_name():
    class CreateThing(Task):
        def execute(self):
            pass
    assert CreateThing().name == "CreateThing"
    assert TaskList("op", [CreateThing()]).run().completed == ["CreateThing"]
