"""GET /os-migrations names the old and new flavors as the reference does: by the
flavors' internal integer ids (the API database's ``flavors.id``), not by the
``flavorid`` of /flavors, at every microversion the clients use (docs/compute-api.md)."""
import sqlalchemy as sa

from novella.db import api_models as am


def test_migration_flavors_are_the_internal_integer_ids(cloud):
    for flavorid, name in (("m1", "odd-a"), ("m2", "odd-b")):
        status, body = cloud.api("POST", "/flavors", {"flavor": {
            "name": name, "id": flavorid, "vcpus": 1, "ram": 512, "disk": 1}})
        assert status == 200, body
    with cloud.aio.api_db.session() as s:
        internal = dict(s.execute(sa.select(am.Flavor.flavorid, am.Flavor.id)
                                  .where(am.Flavor.flavorid.in_(["m1", "m2"]))).all())
    sid = cloud.boot(flavor="m1")
    status, _ = cloud.action(sid, {"resize": {"flavorRef": "m2"}})
    assert status == 202
    cloud.aio.wait_idle()
    for version in ("2.1", "2.23", "2.59", "2.80"):
        status, body = cloud.api("GET", f"/os-migrations?instance_uuid={sid}", version=version)
        assert status == 200, body
        (mig,) = body["migrations"]
        assert (mig["old_instance_type_id"], mig["new_instance_type_id"]) == (
            internal["m1"], internal["m2"]), version
        assert all(type(mig[k]) is int for k in ("old_instance_type_id", "new_instance_type_id"))
