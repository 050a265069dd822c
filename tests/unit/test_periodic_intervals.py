"""Each periodic task runs on its own option, read as the reference reads it:
0 the default period (60 s) where the reference's help says so, a negative
value (or 0 where the reference's help says so) never."""
import pytest
import sqlalchemy as sa
from oslo_config import cfg

from novella import service
from novella.compute.manager import ComputeManager
from novella.conductor.manager import ConductorManager
from novella.conf import compute as compute_conf, conductor as conductor_conf
from novella.conf import scheduler as scheduler_conf
from novella.scheduler.manager import SchedulerManager


class _Owner:
    """What the ``periodic_tasks`` properties read: the configuration, a lease."""
    def __init__(self, conf):
        self.conf, self.lease = conf, conf.conductor.operation_lease


@pytest.fixture
def conf():
    conf = cfg.ConfigOpts()
    for module in (compute_conf, conductor_conf, scheduler_conf):
        module.register_opts(conf)
    conf([], default_config_files=[])
    return conf


def _compute(conf):
    return ComputeManager.periodic_tasks.fget(_Owner(conf))


def test_defaults_are_the_references(conf):
    assert _compute(conf).items() >= {
        "heartbeat": 10, "update_available_resource": 60, "sync_power_states": 600,
        "poll_unconfirmed_resizes": 0, "poll_shelved_instances": 0}.items()
    assert SchedulerManager.periodic_tasks.fget(_Owner(conf)) == {"discover_hosts_in_cells": 0}
    assert ConductorManager.periodic_tasks.fget(_Owner(conf))[
        "poll_unconfirmed_cross_cell_resizes"] == 0


@pytest.mark.parametrize("option, task", [
    ("update_resources_interval", "update_available_resource"),
    ("sync_power_state_interval", "sync_power_states")])
def test_zero_is_the_default_period_and_negative_never(conf, option, task):
    before = _compute(conf)
    for value, period in ((45, 45), (0, service.DEFAULT_INTERVAL), (-1, 0)):
        conf.set_override(option, value)
        after = _compute(conf)
        assert after[task] == period
        assert {k: v for k, v in after.items() if k != task} == \
            {k: v for k, v in before.items() if k != task}  # no other task moves


def test_shelved_poll_runs_only_when_servers_wait_to_be_offloaded(conf):
    conf.set_override("shelved_offload_time", 300)
    conf.set_override("shelved_poll_interval", 120)
    assert _compute(conf)["poll_shelved_instances"] == 120
    for interval in (0, -1):  # the reference's help: 0 or less disables the poll
        conf.set_override("shelved_poll_interval", interval)
        assert _compute(conf)["poll_shelved_instances"] == 0
    conf.set_override("shelved_poll_interval", 120)
    for offload in (0, -1):  # offloaded at once, or never: nothing to poll for
        conf.set_override("shelved_offload_time", offload)
        assert _compute(conf)["poll_shelved_instances"] == 0


def test_resize_confirm_window_enables_both_confirm_polls(conf):
    conf.set_override("resize_confirm_window", 30)
    assert _compute(conf)["poll_unconfirmed_resizes"] == service.DEFAULT_INTERVAL
    assert ConductorManager.periodic_tasks.fget(_Owner(conf))[
        "poll_unconfirmed_cross_cell_resizes"] == service.DEFAULT_INTERVAL


def test_discover_hosts_interval(conf):
    for value, period in ((300, 300), (0, service.DEFAULT_INTERVAL), (-1, 0)):
        conf.set_override("discover_hosts_in_cells_interval", value, group="scheduler")
        assert SchedulerManager.periodic_tasks.fget(_Owner(conf)) == {
            "discover_hosts_in_cells": period}


def test_a_task_without_a_period_is_not_started():
    ran = []
    task = service.Periodic(lambda: ran.append(1), service.spacing(-1), "never").start()
    assert task._task is None
    task.stop()


def test_scheduler_discovers_unmapped_hosts(tmp_path):
    from tests.functional.api.conftest import Cloud
    from novella.db import api_models as am, cell_models as cm
    cloud = Cloud(tmp_path)
    with cloud.db("cell2").session(write=True) as s:
        s.add(cm.Service(uuid="0" * 32, host="new-host", binary="nova-compute",
                         topic="compute"))
    for module in (scheduler_conf,):
        module.register_opts(cloud.conf)
    SchedulerManager(cloud.conf, cloud.api_db, None).discover_hosts_in_cells()
    with cloud.api_db.session() as s:
        cell_id = s.scalar(sa.select(am.HostMapping.cell_id).where(
            am.HostMapping.host == "new-host"))
    assert cell_id == cloud.cells["cell2"].id
