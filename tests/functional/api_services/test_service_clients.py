"""The embedded image and volume services driven by their reference clients
(python-glanceclient, python-cinderclient) over HTTP intercepted in process."""
import pytest
from glanceclient import exc as glance_exc
from glanceclient.v2 import client as glance_client
from wsgi_intercept.interceptor import RequestsInterceptor

from tests.functional.api_services.test_service_apis import ADMIN, ALICE, apis  # noqa: F401


@pytest.fixture
def glance(apis):  # noqa: F811
    with RequestsInterceptor(lambda: apis["image"].app, host="image.test", port=9292):
        yield glance_client.Client("http://image.test:9292", token=ALICE)


def test_glanceclient_error_bodies_raise_its_exceptions(glance, apis):  # noqa: F811
    image_api = apis["services"][0]
    with pytest.raises(glance_exc.HTTPNotFound) as err:
        glance.images.get("9a1d5c6e-0000-4000-8000-000000000000")
    assert "9a1d5c6e-0000-4000-8000-000000000000" in str(err.value)
    before = image_api.list(None, {})
    with pytest.raises(glance_exc.HTTPBadRequest):
        glance.images.list(sort_key="flavour").__next__()
    with pytest.raises(glance_exc.HTTPForbidden):
        glance.images.create(name="pub", visibility="public")
    assert image_api.list(None, {}) == before == []
    image = glance.images.create(name="mine", disk_format="raw", container_format="bare")
    assert glance.images.get(image["id"])["name"] == "mine"
    assert [i["id"] for i in image_api.list(None, {})] == [image["id"]]
