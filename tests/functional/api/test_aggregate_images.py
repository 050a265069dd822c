"""POST /os-aggregates/{id}/images (2.81): the aggregate's hosts cache the images."""
import pytest

from novella.virt import simulated

from tests.functional.moves.conftest import make_cloud  # noqa: F401 - the fixture


@pytest.fixture
def cloud(make_cloud):  # noqa: F811
    return make_cloud(hosts=2)


def _cached(cloud):
    return {host: mgr.driver.cached_images() for host, mgr in cloud.aio.computes.items()}


def test_the_hosts_of_the_aggregate_cache_the_images(cloud):
    first, second = cloud.image("one"), cloud.image("two")
    inside, outside = sorted(cloud.aio.computes)
    status, body = cloud.api("POST", "/os-aggregates", {"aggregate": {"name": "cache"}})
    assert status == 200, body
    agg = body["aggregate"]["id"]
    status, body = cloud.api("POST", f"/os-aggregates/{agg}/action",
                             {"add_host": {"host": inside}})
    assert status == 200, body
    before = _cached(cloud)
    assert first not in before[inside] and second not in before[inside]

    status, body = cloud.api("POST", f"/os-aggregates/{agg}/images",
                             {"cache": [{"id": first}, {"id": second}]}, version="2.81")
    assert status == 202 and body is None
    cloud.aio.wait_idle()
    after = _cached(cloud)
    assert after[inside][-2:] == [first, second]
    assert after[outside] == before[outside]
    # Asked again: already there, nothing fetched.
    status, _ = cloud.api("POST", f"/os-aggregates/{agg}/images", {"cache": [{"id": first}]},
                          version="2.81")
    assert status == 202
    cloud.aio.wait_idle()
    assert _cached(cloud)[inside][-2:] == [second, first]


def test_bad_image_cache_requests_change_nothing(cloud):
    image = cloud.image("one")
    host = sorted(cloud.aio.computes)[0]
    status, body = cloud.api("POST", "/os-aggregates", {"aggregate": {"name": "cache"}})
    agg = body["aggregate"]["id"]
    cloud.api("POST", f"/os-aggregates/{agg}/action", {"add_host": {"host": host}})
    before = _cached(cloud)
    for path, body, token, version, code, fault, message in (
            (f"/os-aggregates/{agg}/images", {"cache": [{"id": image}]}, "admin:admin",
             "2.80", 404, "itemNotFound", "The resource could not be found."),
            (f"/os-aggregates/{agg}/images", {"cache": [{"id": image}, {"id": image}]},
             "admin:admin", "2.81", 400, "badRequest", "Duplicate images in request"),
            (f"/os-aggregates/{agg}/images", {"cache": []}, "admin:admin", "2.81", 400,
             "badRequest", "Invalid input for field/attribute cache"),
            (f"/os-aggregates/{agg}/images", {"cache": [{"id": "nope"}]}, "admin:admin",
             "2.81", 400, "badRequest", "Invalid input for field/attribute id"),
            ("/os-aggregates/9999/images", {"cache": [{"id": image}]}, "admin:admin", "2.81",
             404, "itemNotFound", "Aggregate 9999 could not be found."),
            ("/os-aggregates/x/images", {"cache": [{"id": image}]}, "admin:admin", "2.81",
             400, "badRequest", "Invalid input received: id must be an integer"),
            (f"/os-aggregates/{agg}/images", {"cache": [{"id": image}]}, "alice:project-a",
             "2.81", 403, "forbidden", "compute:aggregates:images")):
        status, out = cloud.api("POST", path, body, token=token, version=version)
        assert status == code, (path, body, out)
        assert out[fault]["code"] == code and message in out[fault]["message"], out
    cloud.aio.wait_idle()
    assert _cached(cloud) == before


def test_an_image_failing_on_a_host_leaves_the_others_cached(cloud):
    first, second = cloud.image("one"), cloud.image("two")
    hosts = sorted(cloud.aio.computes)
    status, body = cloud.api("POST", "/os-aggregates", {"aggregate": {"name": "cache"}})
    agg = body["aggregate"]["id"]
    for host in hosts:
        cloud.api("POST", f"/os-aggregates/{agg}/action", {"add_host": {"host": host}})
    simulated.inject_fault(hosts[0], "cache_image")  # its first image fails
    status, _ = cloud.api("POST", f"/os-aggregates/{agg}/images",
                          {"cache": [{"id": first}, {"id": second}]}, version="2.81")
    assert status == 202
    cloud.aio.wait_idle()
    cached = _cached(cloud)
    assert first not in cached[hosts[0]] and cached[hosts[0]][-1] == second
    assert cached[hosts[1]][-2:] == [first, second]
