"""Server create against the embedded image, network and volume services."""
import json

import sqlalchemy as sa

from novella.context import RequestContext
from novella.db import api_models as am
from novella.image.api import ImageAPI
from novella.network.api import NetworkAPI
from novella.volume.api import VolumeAPI
from tests.schemas import synced


def test_create_checks_real_services_and_asks_for_port_bandwidth(cloud, tmp_path):
    ctxt = RequestContext(user_id="alice", project_id="project-a")
    cloud.image_api = ImageAPI(synced(f"sqlite:///{tmp_path}/image.db", "image"), str(tmp_path / "images"))
    cloud.network_api = NetworkAPI(synced(f"sqlite:///{tmp_path}/network.db", "network"))
    cloud.volume_api = VolumeAPI(synced(f"sqlite:///{tmp_path}/volume.db", "volume"))
    cloud.build_app()
    cloud.flavor()
    image = cloud.image_api.create(ctxt, name="cirros", disk_format="raw", container_format="bare")
    cloud.image_api.upload(ctxt, image["id"], b"\0" * 1024)
    queued = cloud.image_api.create(ctxt, name="empty")
    policy = cloud.network_api.create_qos_policy(ctxt, "bw", [{"type": "minimum_bandwidth",
                                                               "min_kbps": 1000}])
    net = cloud.network_api.create_network(ctxt, "private", cidr="10.0.0.0/24",
                                           physical_network="physnet1")
    port = cloud.network_api.create_port(ctxt, {"network_id": net["id"], "qos_policy_id": policy["id"]})
    volume = cloud.volume_api.create(ctxt, 1)

    def create(**server):
        body = {"name": "s", "flavorRef": "1", "imageRef": image["id"], **server}
        return cloud.user.post("/servers", {"server": body}, version="2.37" if "networks" in server else None)

    before = cloud.counts()
    assert create(imageRef=queued["id"]).status_int == 400
    assert create(networks=[{"uuid": "5a5e0d1e-1b1f-4b4e-9d8f-000000000001"}]).status_int == 400
    assert create(networks=[{"port": "5a5e0d1e-1b1f-4b4e-9d8f-000000000001"}]).status_int == 404
    assert create(block_device_mapping_v2=[{"source_type": "volume", "destination_type": "volume",
                                            "uuid": "5a5e0d1e-1b1f-4b4e-9d8f-000000000001",
                                            "boot_index": 1}]).status_int == 400
    assert cloud.counts() == before

    resp = create(networks=[{"port": port["id"]}],
                  block_device_mapping_v2=[{"source_type": "volume", "destination_type": "volume",
                                            "uuid": volume["id"], "boot_index": 1}])
    assert resp.status_int == 202, resp.body
    with cloud.api_db.session() as s:
        spec = json.loads(s.scalars(sa.select(am.RequestSpec.spec)).one())
    (group,) = spec["requested_resources"]
    assert group["resources"] == {"NET_BW_EGR_KILOBIT_PER_SEC": 1000}
    assert group["requester_id"] == port["id"]
    assert "CUSTOM_PHYSNET_PHYSNET1" in group["required_traits"]
    assert spec["image"]["id"] == image["id"] and spec["image"]["status"] == "active"
    assert create(networks="auto").status_int == 202
    cloud.wait()
    assert cloud.conductor.calls[-1][1]["requested_networks"] == "auto"
