"""PlacementClient against a scripted WSGI app: what goes on the wire."""
import json
import urllib.parse

import pytest

from novella.placement import client as pc


class ScriptedApp:
    """A WSGI app answering from a queue of (status, body) and recording requests."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.calls = []

    def __call__(self, environ, start_response):
        raw = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        self.calls.append({
            "method": environ["REQUEST_METHOD"],
            "path": environ["PATH_INFO"],
            "query": urllib.parse.parse_qsl(environ["QUERY_STRING"]),
            "version": environ.get("HTTP_OPENSTACK_API_VERSION"),
            "token": environ.get("HTTP_X_AUTH_TOKEN"),
            "content_type": environ.get("CONTENT_TYPE"),
            "body": json.loads(raw) if raw else None,
        })
        status, body = self.answers.pop(0) if self.answers else (200, {})
        data = b"" if body is None else json.dumps(body).encode()
        reason = {200: "OK", 204: "No Content", 404: "Not Found", 409: "Conflict"}.get(status, "X")
        start_response(f"{status} {reason}", [("Content-Type", "application/json"),
                                             ("Content-Length", str(len(data)))])
        return [data]


def error(status, code, detail="boom"):
    return (status, {"errors": [{"status": status, "title": "t", "detail": detail, "code": code}]})


def make(*answers, **kw):
    app = ScriptedApp(*answers)
    return pc.PlacementClient(app=app, token="admin", **kw), app


def test_wsgi_adapter_passes_method_path_query_headers_and_body():
    client, app = make((200, {"resource_providers": []}))
    client.list_resource_providers(member_of=[["a", "b"], "!c"], required=["X", "!Y"],
                                   resources={"VCPU": 2, "DISK_GB": 10}, in_tree="t")
    call = app.calls[0]
    assert call["method"] == "GET" and call["path"] == "/resource_providers"
    assert call["query"] == [("member_of", "in:a,b"), ("member_of", "!c"),
                             ("required", "X,!Y"), ("resources", "DISK_GB:10,VCPU:2"),
                             ("in_tree", "t")]
    assert call["version"] == "placement 1.39"
    assert call["token"] == "admin"


def test_microversion_override_per_client_and_per_call():
    client, app = make((200, {}), (200, {}), microversion="1.20")
    client.get("/")
    client.get("/", microversion="1.4")
    assert [c["version"] for c in app.calls] == ["placement 1.20", "placement 1.4"]


def test_errors_map_to_exceptions_with_code_and_detail():
    client, _ = make(error(404, "placement.undefined_code", "no such rp"))
    assert client.get_resource_provider("x") is None
    client, _ = make(error(409, pc.CONCURRENT_UPDATE, "resource provider generation conflict"))
    with pytest.raises(pc.ConcurrentUpdate) as ei:
        client.set_inventory("rp", {"VCPU": 4}, generation=3)
    assert ei.value.status == 409 and ei.value.code == pc.CONCURRENT_UPDATE
    assert not ei.value.consumer_generation
    client, _ = make(error(400, "placement.undefined_code", "bad"))
    with pytest.raises(pc.PlacementError) as ei:
        client.get("/resource_providers")
    assert ei.value.status == 400 and "bad" in str(ei.value)


def test_set_inventory_reads_generation_when_not_given():
    client, app = make((200, {"uuid": "rp", "generation": 7}),
                       (200, {"resource_provider_generation": 8, "inventories": {}}))
    assert client.set_inventory("rp", {"VCPU": 4, "DISK_GB": {"total": 10, "reserved": 1}}) == 8
    put = app.calls[1]
    assert put["method"] == "PUT" and put["content_type"] == "application/json"
    assert put["body"] == {"resource_provider_generation": 7,
                           "inventories": {"VCPU": {"total": 4},
                                           "DISK_GB": {"total": 10, "reserved": 1}}}


def test_retry_rereads_generation_on_provider_conflict():
    client, app = make(error(409, pc.CONCURRENT_UPDATE, "resource provider generation conflict"),
                       (200, {"uuid": "rp", "generation": 5}),
                       (200, {"resource_provider_generation": 6}))
    assert client.set_traits("rp", ["HW_CPU_X86_AVX"], generation=2, retries=2) == 6
    assert [c["body"]["resource_provider_generation"] for c in app.calls if c["method"] == "PUT"] == [2, 5]


def test_no_retry_unless_asked_and_never_on_consumer_generation():
    client, app = make(error(409, pc.CONCURRENT_UPDATE, "rp gen"))
    with pytest.raises(pc.ConcurrentUpdate):
        client.set_aggregates("rp", ["a"], generation=1)
    assert len(app.calls) == 1
    client, app = make(error(409, pc.CONCURRENT_UPDATE, "consumer generation conflict - expected 1 but got 2"))
    with pytest.raises(pc.ConcurrentUpdate) as ei:
        client.put_allocations("c", {"rp": {"VCPU": 1}}, "p", "u", consumer_generation=1, retries=5)
    assert ei.value.consumer_generation and len(app.calls) == 1


def test_put_allocations_body_by_microversion():
    client, app = make((204, None), (204, None))
    client.put_allocations("c", {"rp": {"VCPU": 1}, "empty": {}}, "p", "u")
    assert app.calls[0]["body"] == {"allocations": {"rp": {"resources": {"VCPU": 1}}},
                                    "project_id": "p", "user_id": "u",
                                    "consumer_generation": None, "consumer_type": "INSTANCE"}
    client.put_allocations("c", {"rp": {"resources": {"VCPU": 1}}}, "p", "u", microversion="1.27")
    assert app.calls[1]["body"] == {"allocations": {"rp": {"resources": {"VCPU": 1}}},
                                    "project_id": "p", "user_id": "u"}


def test_move_allocations_posts_one_swap():
    src = {"allocations": {"rp": {"resources": {"VCPU": 2}, "generation": 4}},
           "consumer_generation": 3, "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"}
    client, app = make((200, src), (204, None))
    assert client.move_allocations("inst", "mig") is True
    assert len(app.calls) == 2  # the target, a new consumer, is not read
    post = app.calls[1]
    assert post["method"] == "POST" and post["path"] == "/allocations"
    assert post["body"] == {
        "inst": {"allocations": {}, "project_id": "p", "user_id": "u",
                 "consumer_generation": 3, "consumer_type": "INSTANCE"},
        "mig": {"allocations": {"rp": {"resources": {"VCPU": 2}}}, "project_id": "p",
                "user_id": "u", "consumer_generation": None, "consumer_type": "MIGRATION"},
    }


def test_move_allocations_replaces_what_an_existing_target_holds():
    src = {"allocations": {"rp": {"resources": {"VCPU": 2}}}, "consumer_generation": 3,
           "project_id": "p", "user_id": "u", "consumer_type": "MIGRATION"}
    dst = {"allocations": {"rp2": {"resources": {"VCPU": 1}}}, "consumer_generation": 7,
           "project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"}
    client, app = make((200, src),
                       error(409, pc.CONCURRENT_UPDATE, "consumer generation conflict"),
                       (200, dst), (204, None))
    assert client.move_allocations("mig", "inst", target_consumer_type="INSTANCE") is True
    assert [c["method"] for c in app.calls] == ["GET", "POST", "GET", "POST"]
    assert app.calls[3]["body"]["inst"] == {
        "allocations": {"rp": {"resources": {"VCPU": 2}}}, "project_id": "p", "user_id": "u",
        "consumer_generation": 7, "consumer_type": "INSTANCE"}


def test_move_allocations_nothing_to_move_and_conflict():
    client, app = make((200, {"allocations": {}}))
    assert client.move_allocations("inst", "mig") is False and len(app.calls) == 1
    src = {"allocations": {"rp": {"resources": {"VCPU": 2}}}, "consumer_generation": 1,
           "project_id": "p", "user_id": "u"}
    client, app = make((200, src),
                       error(409, pc.CONCURRENT_UPDATE, "consumer generation conflict"),
                       (200, {"allocations": {}}))
    with pytest.raises(pc.AllocationMoveFailed):  # the source changed: not retried
        client.move_allocations("inst", "mig", retries=3)
    assert len(app.calls) == 3


def test_allocation_candidates_query_and_parsing():
    body = {
        "allocation_requests": [
            {"allocations": {"cn1": {"resources": {"VCPU": 1}}, "pf1": {"resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 10}}},
             "mappings": {"": ["cn1"], "_NET": ["pf1"]}},
            {"allocations": {"cn2": {"resources": {"VCPU": 1}}}},
        ],
        "provider_summaries": {
            "cn1": {"resources": {}, "traits": [], "root_provider_uuid": "cn1"},
            "pf1": {"resources": {}, "traits": [], "root_provider_uuid": "cn1"},
            "cn2": {"resources": {}, "traits": [], "root_provider_uuid": "cn2"},
        },
    }
    client, app = make((200, body))
    groups = [pc.RequestGroup(resources={"VCPU": 1, "MEMORY_MB": 512}, required=["!CUSTOM_X"],
                              member_of=[["a1", "a2"]]),
              {"suffix": "_NET", "resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 10},
               "any_traits": [["CUSTOM_P1", "CUSTOM_P2"]], "in_tree": "cn1"}]
    cands = client.get_allocation_candidates(groups, limit=10, group_policy="none",
                                             same_subtree=[["_NET", ""]], root_required=["!CUSTOM_Y"])
    assert app.calls[0]["query"] == [
        ("resources", "MEMORY_MB:512,VCPU:1"), ("required", "!CUSTOM_X"), ("member_of", "in:a1,a2"),
        ("resources_NET", "NET_BW_EGR_KILOBIT_PER_SEC:10"), ("required_NET", "in:CUSTOM_P1,CUSTOM_P2"),
        ("in_tree_NET", "cn1"), ("limit", "10"), ("group_policy", "none"),
        ("same_subtree", "_NET,"), ("root_required", "!CUSTOM_Y")]
    assert len(cands) == 2 and cands.providers() == ["cn1", "cn2"]
    assert cands.allocation_requests[0]["mappings"]["_NET"] == ["pf1"]


def test_candidates_are_read_lean_for_the_scheduler_and_whole_when_asked():
    with_mappings = {"allocations": {"cn1": {"resources": {"VCPU": 1, "MEMORY_MB": 512}},
                                     "pf1": {"resources": {"NET_BW_EGR_KILOBIT_PER_SEC": 10}}},
                     "mappings": {"": ["cn1"], "_NET": ["pf1"]}}
    without = {"allocations": {"cn2": {"resources": {"VCPU": 1}}}}
    body = {"allocation_requests": [with_mappings, without], "provider_summaries": {
        "cn1": {"resources": {"VCPU": {"capacity": 16, "used": 2},
                              "MEMORY_MB": {"capacity": 4096, "used": 512},
                              "PCPU": {"capacity": 4, "used": 0}},
                "traits": ["COMPUTE_NODE", "HW_CPU_X86_AVX2"],
                "parent_provider_uuid": None, "root_provider_uuid": "cn1"},
        "pf1": {"resources": {"NET_BW_EGR_KILOBIT_PER_SEC": {"capacity": 1000, "used": 0}},
                "traits": ["CUSTOM_PHYSNET"], "parent_provider_uuid": "cn1",
                "root_provider_uuid": "cn1"},
        "cn2": {"resources": {"DISK_GB": {"capacity": 100.0, "used": 1}}, "traits": [],
                "parent_provider_uuid": None, "root_provider_uuid": "cn2"}}}
    client, _ = make((200, body))
    cands = client.get_allocation_candidates({"resources": {"VCPU": 1}})
    # Each request as placement sent it, mappings only where it sent them.
    assert [r.decoded() for r in cands.requests] == [with_mappings, without]
    assert cands.allocation_requests == [with_mappings, without]
    assert list(cands.requests[0].allocations) == ["cn1", "pf1"]
    # The summaries: the standard classes' figures, the tree, the traits when asked.
    cn1, pf1, cn2 = (cands.summaries[rp] for rp in ("cn1", "pf1", "cn2"))
    assert (cn1.resources.VCPU.capacity, cn1.resources.VCPU.used) == (16, 2)
    assert (cn1.resources.MEMORY_MB.capacity, cn1.resources.DISK_GB) == (4096, None)
    assert cn2.resources.DISK_GB.capacity == 100.0 and cn2.resources.VCPU is None
    assert pc.traits_of(cn1.traits) == ["COMPUTE_NODE", "HW_CPU_X86_AVX2"]
    assert (pf1.root_provider_uuid, pf1.parent_provider_uuid) == ("cn1", "cn1")
    assert pc.traits_of(pf1.traits) == ["CUSTOM_PHYSNET"]
    assert cands.provider_summaries == body["provider_summaries"]
    assert len(cands) == 2 and cands.providers() == ["cn1", "cn2"]


def test_a_candidates_answer_of_the_wrong_shape_is_refused():
    client, _ = make((200, {"allocation_requests": [{"allocations": {"cn1": 5}}],
                            "provider_summaries": {"cn1": {"resources": {"VCPU": 1}}}}))
    with pytest.raises(ValueError, match="provider_summaries"):
        client.get_allocation_candidates({"resources": {"VCPU": 1}})


def test_old_style_candidates_are_normalised():
    body = {"allocation_requests": [{"allocations": [
        {"resource_provider": {"uuid": "cn1"}, "resources": {"VCPU": 1}}]}],
        "provider_summaries": {}}
    client, _ = make((200, body))
    cands = client.get_allocation_candidates({"resources": {"VCPU": 1}}, microversion="1.10")
    assert cands.allocation_requests == [{"allocations": {"cn1": {"resources": {"VCPU": 1}}}}]
    assert [r.decoded() for r in cands.requests] == cands.allocation_requests
    assert cands.providers() == ["cn1"]  # no summary before 1.29 names a root


def test_ensure_resource_provider_creates_with_parent_and_survives_race():
    rp = {"uuid": "c", "name": "c", "generation": 0, "parent_provider_uuid": "r"}
    client, app = make(error(404, None), (200, rp))
    assert client.ensure_resource_provider("c", "c", parent_provider_uuid="r") == rp
    assert app.calls[1]["body"] == {"name": "c", "uuid": "c", "parent_provider_uuid": "r"}
    # Someone else created it between our GET and POST.
    client, app = make(error(404, None), error(409, "placement.duplicate_name"), (200, rp))
    assert client.ensure_resource_provider("c", "c") == rp


def test_keystoneauth_style_session_is_used_with_endpoint_filter():
    class FakeSession:
        def __init__(self):
            self.calls = []

        def request(self, url, method, **kw):
            self.calls.append((url, method, kw))
            app = ScriptedApp((200, {"usages": {"VCPU": 1}}))
            http = pc.PlacementClient(app=app)
            return http.http.request(method, pc.WSGI_BASE_URL + url, headers=kw["headers"],
                                     params=kw["params"])

    sess = FakeSession()
    client = pc.PlacementClient(session=sess, region_name="R1")
    assert client.get_usages("proj") == {"VCPU": 1}
    url, method, kw = sess.calls[0]
    assert (url, method) == ("/usages", "GET")
    assert kw["endpoint_filter"] == {"service_type": "placement", "interface": "internal",
                                     "region_name": "R1"}
    assert kw["raise_exc"] is False


def test_exactly_one_transport():
    with pytest.raises(ValueError):
        pc.PlacementClient()
    with pytest.raises(ValueError):
        pc.PlacementClient(endpoint="http://x", app=lambda e, s: [])
