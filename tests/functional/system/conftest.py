"""A whole Novella (all-in-one, no HTTP listeners) for end-to-end flows."""
import pytest
import webob

from novella.allinone import AllInOne


class Cloud:
    def __init__(self, aio):
        self.aio = aio

    def api(self, method, path, body=None, token="admin:admin", version="2.79"):
        req = webob.Request.blank("/v2.1" + path, method=method)
        req.headers["X-Auth-Token"] = token
        req.headers["OpenStack-API-Version"] = f"compute {version}"
        if body is not None:
            req.json_body = body
            req.content_type = "application/json"
        resp = req.get_response(self.aio.compute_api_app)
        return resp.status_int, (resp.json_body if resp.body else None)

    def boot(self, name="vm", flavor="1", token="admin:admin", **extra):
        server = {"name": name, "flavorRef": flavor, "imageRef": self.aio.demo_image["id"],
                  "networks": "auto", **extra}
        status, body = self.api("POST", "/servers", {"server": server}, token=token)
        assert status == 202, body
        self.aio.wait_idle()
        return body["server"]["id"]

    def server(self, server_id, token="admin:admin"):
        status, body = self.api("GET", f"/servers/{server_id}", token=token)
        assert status == 200, body
        return body["server"]

    def usages(self):
        """{provider name: usages} for every compute node provider."""
        out = {}
        for rp in self.aio.placement.list_resource_providers():
            out[rp["name"]] = self.aio.placement.get(
                f"/resource_providers/{rp['uuid']}/usages")["usages"]
        return out

    def allocations(self, consumer):
        return self.aio.placement.get(f"/allocations/{consumer}")["allocations"]


@pytest.fixture
def cloud(tmp_path):
    aio = AllInOne(str(tmp_path / "data"), cells=2, hosts_per_cell=2, log=None).start()
    yield Cloud(aio)
    aio.stop()


def cloud_factory(tmp_path, cloud_class, cells):
    """A generator fixture body: yields make(hosts_per_cell, **{group: {opt: value}}).

    Each call starts an all-in-one with those option overrides; at teardown
    every cloud is stopped, injected faults cleared and overrides undone.
    """
    from novella.conf import CONF
    from novella.virt import simulated
    started, overridden = [], []

    def make(hosts_per_cell, **overrides):
        conf = {(None if g == "DEFAULT" else g): v for g, v in overrides.items()}
        overridden.extend((key, group) for group, values in conf.items() for key in values)
        aio = AllInOne(str(tmp_path / f"data{len(started)}"), cells=cells,
                       hosts_per_cell=hosts_per_cell, log=None, config_overrides=conf).start()
        started.append(aio)
        return cloud_class(aio)

    yield make
    for aio in started:
        aio.stop()
    simulated.clear_faults()
    for key, group in overridden:
        CONF.clear_override(key, group=group)
