"""Stable device rescue (``hw_rescue_bus`` / ``hw_rescue_device`` on the rescue image),
through the Compute API of an all-in-one: the devices of the simulated guest while
rescued, volume-backed servers from 2.87, bad input refused and changing nothing."""
import os

import pytest

from novella.compute.states import power_state
from novella.context import get_admin_context
from novella.virt import simulated
from tests.functional.moves.conftest import make_cloud  # noqa: F401 - fixture


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=1)


def _image(cloud, data=b"rescue image\n" * 16, **properties):
    api = cloud.aio.image_api
    image = api.create(None, name="rescue", visibility="public", disk_format="qcow2",
                       container_format="bare", properties=properties)
    api.upload(None, image["id"], data)
    return image["id"]


def _guest(cloud, sid):
    driver = cloud.aio.computes[cloud.server(sid)["OS-EXT-SRV-ATTR:host"]].driver
    return driver._load(sid), driver.instance_dir(sid)


def _rescue(cloud, sid, image_id=None, version="2.87", expect=200):
    body = {"rescue": {"rescue_image_ref": image_id} if image_id else None}
    status, resp = cloud.action(sid, body, version=version)
    assert status == expect, resp
    cloud.aio.wait_idle()
    return resp


def _state(cloud, sid):
    s = cloud.server(sid)
    return s["status"], s["OS-EXT-STS:task_state"]


@pytest.mark.parametrize("props, device, bus", [
    ({"hw_rescue_device": "disk", "hw_rescue_bus": "virtio"}, "disk", "virtio"),
    ({"hw_rescue_device": "disk", "hw_rescue_bus": "scsi"}, "disk", "scsi"),
    ({"hw_rescue_device": "cdrom", "hw_rescue_bus": "ide"}, "cdrom", "ide"),
    ({"hw_rescue_bus": "usb"}, "disk", "usb"),
    ({"hw_rescue_device": "cdrom"}, "cdrom", "ide"),
])
def test_stable_rescue_keeps_the_root_disk_and_adds_the_rescue_disk(cloud, props, device, bus):
    sid = cloud.boot()
    books = cloud.books(sid)
    volume = cloud.aio.volume_api.create(get_admin_context(), 1, name="data")
    status, body = cloud.api("POST", f"/servers/{sid}/os-volume_attachments",
                             {"volumeAttachment": {"volumeId": volume["id"]}})
    assert status == 200, body
    cloud.aio.wait_idle()
    image_id = _image(cloud, **props)
    _rescue(cloud, sid, image_id)
    assert _state(cloud, sid) == ("RESCUE", None)
    domain, inst_dir = _guest(cloud, sid)
    assert domain["rescue"] == {"stable": True, "device": device, "bus": bus, "boot": "disk.rescue",
                                "devices": ["disk", volume["id"], "disk.rescue"]}
    head, content = simulated.read_disk(os.path.join(inst_dir, simulated.RESCUE_DISK))
    assert head["image"] == image_id and content == b"rescue image\n" * 16
    assert os.path.exists(os.path.join(inst_dir, "disk"))
    status, resp = cloud.action(sid, {"unrescue": None})
    assert status == 202, resp
    cloud.aio.wait_idle()
    assert _state(cloud, sid) == ("ACTIVE", None)
    domain, inst_dir = _guest(cloud, sid)
    assert "rescue" not in domain and not domain["rescued"]
    assert not os.path.exists(os.path.join(inst_dir, simulated.RESCUE_DISK))
    assert list(domain["volumes"]) == [volume["id"]]
    assert cloud.books(sid) == books


def test_without_the_properties_the_rescue_disk_takes_the_root_disk_place(cloud):
    sid = cloud.boot()
    _rescue(cloud, sid, _image(cloud))
    domain, _dir = _guest(cloud, sid)
    assert domain["rescue"] == {"stable": False, "device": "disk", "bus": "virtio",
                                "boot": "disk.rescue", "devices": ["disk.rescue", "disk"]}


def test_a_volume_backed_server_is_rescued_from_2_87_with_both_properties(cloud):
    sid, root = cloud.boot_from_volume()
    books = cloud.books(sid)
    both = _image(cloud, hw_rescue_device="disk", hw_rescue_bus="virtio")
    bus_only = _image(cloud, hw_rescue_bus="virtio")
    for image_id, version in ((both, "2.86"), (bus_only, "2.87"), (None, "2.87")):
        status, resp = cloud.action(sid, {"rescue": {"rescue_image_ref": image_id}
                                          if image_id else None}, version=version)
        assert status == 400, resp
        assert "Cannot rescue a volume-backed instance" in resp["badRequest"]["message"]
    assert _state(cloud, sid) == ("ACTIVE", None) and "rescue" not in _guest(cloud, sid)[0]
    _rescue(cloud, sid, both, version="2.87")
    assert _state(cloud, sid) == ("RESCUE", None)
    domain, inst_dir = _guest(cloud, sid)
    assert domain["rescue"]["devices"] == [root, "disk.rescue"]
    assert domain["rescue"]["stable"] and domain["power_state"] == power_state.RUNNING
    assert cloud.aio.volume_api.get(get_admin_context(), root)["status"] == "in-use"
    status, resp = cloud.action(sid, {"unrescue": None})
    assert status == 202, resp
    cloud.aio.wait_idle()
    assert _state(cloud, sid) == ("ACTIVE", None)
    assert "rescue" not in _guest(cloud, sid)[0]
    assert cloud.books(sid) == books


def test_a_host_without_the_bfv_rescue_trait_refuses(make_cloud):  # noqa: F811
    cloud = make_cloud(hosts=1)
    sid, _root = cloud.boot_from_volume()
    host = cloud.server(sid)["OS-EXT-SRV-ATTR:host"]
    placement, rp = cloud.aio.placement, cloud.rp(host)
    placement.set_traits(rp, [t for t in placement.get_traits(rp)[1]
                              if t != "COMPUTE_RESCUE_BFV"])
    image_id = _image(cloud, hw_rescue_device="disk", hw_rescue_bus="virtio")
    status, resp = cloud.action(sid, {"rescue": {"rescue_image_ref": image_id}}, version="2.87")
    assert status == 400 and "Host unable to rescue" in resp["badRequest"]["message"], resp
    assert _state(cloud, sid) == ("ACTIVE", None)


def test_unknown_bus_or_device_and_volume_snapshot_images_are_not_supported(cloud):
    sid = cloud.boot()
    for props in ({"hw_rescue_bus": "pcie"}, {"hw_rescue_device": "tape"},
                  {"img_block_device_mapping": "[]"}):
        status, resp = cloud.action(sid, {"rescue": {"rescue_image_ref": _image(cloud, **props)}},
                                    version="2.87")
        assert status == 400 and "is not supported" in resp["badRequest"]["message"], resp
    assert _state(cloud, sid) == ("ACTIVE", None) and "rescue" not in _guest(cloud, sid)[0]


def test_a_failing_stable_rescue_leaves_the_server_active_with_a_fault(cloud):
    sid = cloud.boot()
    image_id = _image(cloud, hw_rescue_device="disk", hw_rescue_bus="virtio")
    simulated.inject_fault(cloud.host_of(sid), "rescue", sid)
    _rescue(cloud, sid, image_id)
    assert _state(cloud, sid) == ("ACTIVE", None)
    assert "injected fault in rescue" in cloud.fault(sid)
    domain, inst_dir = _guest(cloud, sid)
    assert "rescue" not in domain and not os.path.exists(
        os.path.join(inst_dir, simulated.RESCUE_DISK))
    # Asked again, it works, with the same properties.
    _rescue(cloud, sid, image_id)
    assert _guest(cloud, sid)[0]["rescue"]["stable"]
