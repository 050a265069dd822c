"""A small all-in-one (one cell, a few hosts) for move tests, and book-keeping helpers."""
import pytest

from tests.functional.system.conftest import Cloud, cloud_factory


class MoveCloud(Cloud):
    def action(self, server_id, body, token="admin:admin", version="2.79"):
        return self.api("POST", f"/servers/{server_id}/action", body, token=token,
                        version=version)

    def host_of(self, server_id):
        return self.server(server_id)["OS-EXT-SRV-ATTR:host"]

    def rp(self, host):
        return self.aio.computes[host].rt.provider_uuid

    def books(self, *consumers):
        """{consumer: {host: resources}} for each consumer, plus usages by host."""
        names = {self.rp(h): h for h in self.aio.computes}
        out = {c: {names[rp]: a["resources"] for rp, a in self.allocations(c).items()}
               for c in consumers}
        return out, self.usages()

    def migrations(self, server_id):
        status, body = self.api("GET", f"/os-migrations?instance_uuid={server_id}",
                                version="2.59")
        assert status == 200, body
        return body["migrations"]

    def events(self, server_id, action_name):
        """{event name: result} of the server's latest action called ``action_name``."""
        status, body = self.api("GET", f"/servers/{server_id}/os-instance-actions")
        assert status == 200, body
        req_id = next(a["request_id"] for a in body["instanceActions"]
                      if a["action"] == action_name)
        status, body = self.api("GET", f"/servers/{server_id}/os-instance-actions/{req_id}")
        assert status == 200, body
        return {e["event"]: e["result"] for e in body["instanceAction"]["events"]}

    def fault(self, server_id):
        """The message of the server's latest instance fault ('' if none)."""
        import sqlalchemy as sa
        from novella.db import cell_models as cm, cells
        cell = cells.instance_cell(self.aio.api_db, server_id)
        with cells.cell_database(cell).session() as s:
            row = s.scalars(sa.select(cm.InstanceFault).where(
                cm.InstanceFault.instance_uuid == server_id)
                .order_by(cm.InstanceFault.id.desc())).first()
            return row.message if row is not None else ""

    def image(self, name="img", data=b"\0" * 1024, **properties):
        """A public raw image with ``properties``, uploaded; its id."""
        from novella.context import get_admin_context
        image = self.aio.image_api.create(get_admin_context(), name=name, visibility="public",
                                          disk_format="raw", container_format="bare",
                                          properties=properties)
        self.aio.image_api.upload(get_admin_context(), image["id"], data)
        return image["id"]

    def boot_from_volume(self):
        """An ACTIVE server whose root disk is a volume made from the demo image:
        (server id, volume id)."""
        from novella.context import get_admin_context
        root = self.aio.volume_api.create(get_admin_context(), 1, name="root",
                                          image_id=self.aio.demo_image["id"])
        status, body = self.api("POST", "/servers", {"server": {
            "name": "bfv", "flavorRef": "1", "networks": "auto",
            "block_device_mapping_v2": [{"source_type": "volume",
                                         "destination_type": "volume",
                                         "uuid": root["id"], "boot_index": 0}]}})
        assert status == 202, body
        self.aio.wait_idle()
        sid = body["server"]["id"]
        assert self.server(sid)["status"] == "ACTIVE", self.fault(sid)
        return sid, root["id"]

    def flavor(self, flavorid, vcpus, ram, disk, **extra):
        status, body = self.api("POST", "/flavors", {"flavor": {
            "name": f"f{flavorid}", "ram": ram, "vcpus": vcpus, "disk": disk, "id": flavorid,
            **extra}})
        assert status == 200, body
        return flavorid


@pytest.fixture
def make_cloud(tmp_path):
    """make_cloud(hosts=2, **{group: {option: value}}) -> a started MoveCloud."""
    factory = cloud_factory(tmp_path, MoveCloud, cells=1)
    make = next(factory)
    yield lambda hosts=2, **overrides: make(hosts, **overrides)
    next(factory, None)


@pytest.fixture
def cloud(make_cloud):
    return make_cloud(hosts=2)
