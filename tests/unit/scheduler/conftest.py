import types

import pytest
from oslo_config import cfg

from novella import conf as conf_pkg
from novella.scheduler.host_manager import HostState


@pytest.fixture
def conf():
    c = cfg.ConfigOpts()
    for module in (conf_pkg.compute, conf_pkg.rpc, conf_pkg.scheduler):
        module.register_opts(c)
    c([], default_config_files=[])
    return c


def make_host(host="h1", aggregates=(), up=True, disabled=False, forced_down=False, **attrs):
    node = types.SimpleNamespace(
        host=host, hypervisor_hostname=host, uuid=f"uuid-{host}", hypervisor_type="fake",
        hypervisor_version=1000000, cpu_info='{"arch": "x86_64"}', vcpus=8, vcpus_used=0,
        memory_mb=8192, memory_mb_used=0, local_gb=100, local_gb_used=0,
        cpu_allocation_ratio=1.0, ram_allocation_ratio=1.0, disk_allocation_ratio=1.0,
        running_vms=0)
    service = {"disabled": disabled, "disabled_reason": None, "forced_down": forced_down, "up": up}
    hs = HostState(node, service, "cell-1")
    hs.aggregates = [{"uuid": f"agg{i}", "name": f"agg{i}", "metadata": md}
                     for i, md in enumerate(aggregates)]
    for k, v in attrs.items():
        setattr(hs, k, v)
    return hs


@pytest.fixture
def host():
    return make_host
