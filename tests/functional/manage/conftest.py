"""An all-in-one with two cells (one host each, bandwidth on physnet0) and the
`novella manage` command run against it in the same process."""
import io
import contextlib

import pytest

from novella.cmd import main as cli
from novella.cmd import manage_placement
from novella.conf import CONF
from novella.context import get_admin_context
from tests.functional.moves.conftest import MoveCloud
from tests.functional.system.conftest import cloud_factory

BW_RULES = [{"type": "minimum_bandwidth", "min_kbps": 1000, "direction": "egress"},
            {"type": "minimum_bandwidth", "min_kbps": 1000, "direction": "ingress"}]


class ManageCloud(MoveCloud):
    def manage(self, *argv):
        """Run `novella manage ARGV...`; -> (exit code, stdout)."""
        out = io.StringIO()
        code = 0
        with contextlib.redirect_stdout(out):
            try:
                cli.main(["manage", *argv])
            except SystemExit as exc:
                code = exc.code
        return code, out.getvalue()

    def bandwidth_port(self):
        """A port on a physnet0 network whose QoS policy asks 1000 kbps each way."""
        net_api, ctxt = self.aio.network_api, get_admin_context()
        policy = net_api.create_qos_policy(ctxt, "qos", BW_RULES)
        net = net_api.create_network(ctxt, "phys", cidr="10.20.0.0/24", shared=True,
                                     physical_network="physnet0")
        return net_api.create_port(ctxt, {"network_id": net["id"], "qos_policy_id": policy["id"]})

    def port(self, port_id):
        return self.aio.network_api.get_port(get_admin_context(), port_id)

    def delete(self, server_id):
        status, body = self.api("DELETE", f"/servers/{server_id}")
        assert status == 204, body
        self.aio.wait_idle()

    def provider(self, name):
        return next(rp["uuid"] for rp in self.aio.placement.list_resource_providers()
                    if rp["name"] == name)

    def cell_db(self, index=0):
        from novella.db import cells
        return cells.cell_database(self.aio.cells[index])


@pytest.fixture
def make_cloud(tmp_path, monkeypatch):
    factory = cloud_factory(tmp_path, ManageCloud, cells=2)
    make = next(factory)
    clouds = []

    def build(**overrides):
        c = make(1, simulated={"resource_provider_bandwidths": ["physnet0:10000:10000"]},
                 **overrides)
        clouds.append(c)
        monkeypatch.setattr(manage_placement, "_clients",
                            lambda api_url: (c.aio.placement, c.aio.network_api))
        return c
    yield build
    CONF.clear_override("connection", group="database")
    next(factory, None)


@pytest.fixture
def cloud(make_cloud):
    return make_cloud()
