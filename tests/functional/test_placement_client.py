"""The Placement client against a real Placement service.

By default the service is Novella's, embedded in-process (the client's WSGI
transport). Set ``NOVELLA_PLACEMENT_TEST_URL`` to run the same tests against
any live endpoint as well, such as the reference under gunicorn. Every test
works on fresh uuids, so a shared live database does not disturb it.
"""
import uuid

import pytest

from novella.placement import client as pc
from tests.functional import placement_targets as targets

TARGETS = ["novella"] + (["live"] if targets.LIVE_URL else [])


@pytest.fixture(params=TARGETS)
def client(request, tmp_path):
    if request.param == "novella":
        c = targets.novella_client(f"sqlite:///{tmp_path}/placement.db")
    else:
        c = targets.live_client()
    yield c
    c.close()


def u():
    return str(uuid.uuid4())


def compute_node(client, vcpu=8, mem=4096, disk=100, traits=(), aggs=(), parent=None, name=None):
    rp = u()
    client.ensure_resource_provider(rp, name or "cn-" + rp[:8], parent_provider_uuid=parent)
    inv = {}
    if vcpu:
        inv["VCPU"] = {"total": vcpu, "allocation_ratio": 1.0}
    if mem:
        inv["MEMORY_MB"] = {"total": mem, "allocation_ratio": 1.0}
    if disk:
        inv["DISK_GB"] = {"total": disk, "allocation_ratio": 1.0}
    if inv:
        client.set_inventory(rp, inv)
    if traits:
        client.set_traits(rp, traits)
    if aggs:
        client.set_aggregates(rp, aggs)
    return rp


def test_root_document(client):
    v = client.versions()
    assert v["min_version"] == "1.0" and v["max_version"] == "1.39"


def test_ensure_provider_tree_is_idempotent(client):
    root, child = u(), u()
    r = client.ensure_resource_provider(root, "root-" + root[:8])
    assert r["uuid"] == root and r["generation"] == 0
    c = client.ensure_resource_provider(child, "child-" + child[:8], parent_provider_uuid=root)
    assert c["parent_provider_uuid"] == root and c["root_provider_uuid"] == root
    again = client.ensure_resource_provider(child, "child-" + child[:8], parent_provider_uuid=root)
    assert again["uuid"] == child and again["generation"] == c["generation"]
    assert {p["uuid"] for p in client.list_resource_providers(in_tree=child)} == {root, child}
    other = client.ensure_resource_provider(u(), "other-" + root[:8])["uuid"]
    moved = client.update_resource_provider(child, "renamed-" + child[:8], parent_provider_uuid=other)
    assert moved["parent_provider_uuid"] == other and moved["root_provider_uuid"] == other
    assert client.list_resource_providers(name="renamed-" + child[:8])[0]["uuid"] == child
    assert client.get_resource_provider(u()) is None
    assert client.delete_resource_provider(child) is True
    assert client.delete_resource_provider(child) is False


def test_inventory_generations(client):
    rp = compute_node(client, vcpu=0, mem=0, disk=0)
    gen = client.set_inventory(rp, {"VCPU": 4}, generation=0)
    assert gen == 1
    with pytest.raises(pc.ConcurrentUpdate):
        client.set_inventory(rp, {"VCPU": 8}, generation=0)
    assert client.get_inventories(rp) == (1, {"VCPU": {
        "total": 4, "reserved": 0, "min_unit": 1, "max_unit": 2147483647, "step_size": 1,
        "allocation_ratio": 1.0}})
    # A stale generation with retries: re-read, then write.
    assert client.set_inventory(rp, {"VCPU": 8, "DISK_GB": {"total": 50, "reserved": 5}},
                                generation=0, retries=1) == 2
    gen, inv = client.get_inventories(rp)
    assert gen == 2 and inv["VCPU"]["total"] == 8 and inv["DISK_GB"]["reserved"] == 5
    assert client.delete_inventory(rp, "DISK_GB") == 3
    assert set(client.get_inventories(rp)[1]) == {"VCPU"}


def test_traits_aggregates_and_filters(client):
    agg, trait = u(), "CUSTOM_T_" + uuid.uuid4().hex[:8].upper()
    a = compute_node(client, traits=[trait, "HW_CPU_X86_AVX2"], aggs=[agg])
    b = compute_node(client, aggs=[agg])
    gen, traits = client.get_traits(a)
    assert traits == sorted([trait, "HW_CPU_X86_AVX2"])
    assert client.get_aggregates(a)[1] == [agg]
    # inventory (1) + traits (2) + aggregates (3)
    assert gen == 3 and client.get_aggregates(a)[0] == 3
    assert {p["uuid"] for p in client.list_resource_providers(member_of=[agg])} == {a, b}
    assert [p["uuid"] for p in client.list_resource_providers(member_of=[agg], required=[trait])] == [a]
    assert [p["uuid"] for p in client.list_resource_providers(member_of=[agg], required=["!" + trait])] == [b]
    assert client.list_resource_providers(member_of=[agg], resources={"VCPU": 9}) == []
    with pytest.raises(pc.ConcurrentUpdate):
        client.set_aggregates(b, [], generation=0)
    assert client.set_aggregates(b, [], retries=1) == 3
    assert client.set_traits(a, []) == 4 and client.get_traits(a)[1] == []


def test_put_get_delete_allocations_with_consumer_generation(client):
    rp = compute_node(client)
    inst, proj, user = u(), u(), u()
    client.put_allocations(inst, {rp: {"VCPU": 2, "MEMORY_MB": 512}}, proj, user)
    got = client.get_allocations(inst)
    assert got["allocations"][rp]["resources"] == {"VCPU": 2, "MEMORY_MB": 512}
    assert got["consumer_generation"] == 1 and got["project_id"] == proj
    assert got["consumer_type"] == "INSTANCE"
    # A stale consumer generation is a consumer conflict: never retried.
    with pytest.raises(pc.ConcurrentUpdate) as ei:
        client.put_allocations(inst, {rp: {"VCPU": 1}}, proj, user, consumer_generation=None, retries=3)
    assert ei.value.consumer_generation
    client.put_allocations(inst, {rp: {"VCPU": 1}}, proj, user, consumer_generation=1)
    assert client.get_provider_usages(rp)[1] == {"VCPU": 1, "MEMORY_MB": 0, "DISK_GB": 0}
    held = client.get_provider_allocations(rp)
    assert list(held) == [inst] and held[inst]["resources"] == {"VCPU": 1}
    assert client.delete_allocations(inst) is True
    assert client.delete_allocations(inst) is False
    assert client.get_allocations(inst)["allocations"] == {}
    assert client.get_provider_usages(rp)[1]["VCPU"] == 0


def test_move_allocations_to_migration_and_back(client):
    src, dst = compute_node(client), compute_node(client)
    inst, mig, proj, user = u(), u(), u(), u()
    client.put_allocations(inst, {src: {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}}, proj, user)
    assert client.move_allocations(inst, mig) is True
    assert client.get_allocations(inst)["allocations"] == {}
    moved = client.get_allocations(mig)
    assert moved["allocations"][src]["resources"] == {"VCPU": 2, "MEMORY_MB": 1024, "DISK_GB": 10}
    assert moved["project_id"] == proj and moved["consumer_type"] == "MIGRATION"
    assert client.get_provider_usages(src)[1]["VCPU"] == 2
    usages = client.get_usages(proj)
    assert usages["MIGRATION"]["VCPU"] == 2 and usages["MIGRATION"]["consumer_count"] == 1
    # The instance claims the destination; revert hands the source back.
    client.put_allocations(inst, {dst: {"VCPU": 2}}, proj, user, consumer_generation=None)
    assert client.move_allocations(mig, inst) is True
    back = client.get_allocations(inst)
    assert set(back["allocations"]) == {src} and back["consumer_type"] == "INSTANCE"
    assert client.get_allocations(mig)["allocations"] == {}
    assert client.get_provider_usages(dst)[1]["VCPU"] == 0
    assert client.move_allocations(mig, inst) is False


def test_post_allocations_is_atomic(client):
    rp = compute_node(client, vcpu=4)
    a, b, proj, user = u(), u(), u(), u()
    with pytest.raises(pc.Conflict):
        client.post_allocations({
            a: {"allocations": {rp: {"VCPU": 3}}, "project_id": proj, "user_id": user},
            b: {"allocations": {rp: {"VCPU": 3}}, "project_id": proj, "user_id": user},
        })
    assert client.get_allocations(a)["allocations"] == {}
    assert client.get_allocations(b)["allocations"] == {}
    assert client.get_provider_usages(rp)[1]["VCPU"] == 0
    client.post_allocations({
        a: {"allocations": {rp: {"VCPU": 2}}, "project_id": proj, "user_id": user},
        b: {"allocations": {rp: {"VCPU": 2}}, "project_id": proj, "user_id": user,
            "consumer_type": "MIGRATION"},
    })
    assert client.get_provider_usages(rp)[1]["VCPU"] == 4
    assert client.get_usages(proj, user) == {
        "INSTANCE": {"consumer_count": 1, "VCPU": 2},
        "MIGRATION": {"consumer_count": 1, "VCPU": 2}}


def test_allocation_candidates(client):
    agg, trait = u(), "CUSTOM_C_" + uuid.uuid4().hex[:8].upper()
    bw = "CUSTOM_BW_" + uuid.uuid4().hex[:8].upper()
    client.ensure_resource_class(bw)
    a = compute_node(client, traits=[trait], aggs=[agg])
    b = compute_node(client, aggs=[agg])
    nic = compute_node(client, vcpu=0, mem=0, disk=0, parent=a, traits=["CUSTOM_PHYSNET_X"])
    client.set_inventory(nic, {bw: 1000})
    base = {"resources": {"VCPU": 1, "MEMORY_MB": 256}, "member_of": [[agg]]}
    cands = client.get_allocation_candidates(base)
    assert sorted(cands.providers()) == sorted([a, b])
    assert cands.provider_summaries[a]["resources"]["VCPU"] == {"capacity": 8, "used": 0}
    assert trait in cands.provider_summaries[a]["traits"]
    cands = client.get_allocation_candidates(dict(base, required=[trait]))
    assert cands.providers() == [a]
    assert len(client.get_allocation_candidates(dict(base, required=["!" + trait]))) == 1
    assert len(client.get_allocation_candidates(base, limit=1)) == 1
    granular = [pc.RequestGroup(**base),
                pc.RequestGroup(suffix="_NET", resources={bw: 100}, required=["CUSTOM_PHYSNET_X"])]
    cands = client.get_allocation_candidates(granular, group_policy="none")
    assert len(cands) == 1
    req = cands.allocation_requests[0]
    assert req["allocations"] == {a: {"resources": {"VCPU": 1, "MEMORY_MB": 256}},
                                  nic: {"resources": {bw: 100}}}
    assert req["mappings"] == {"": [a], "_NET": [nic]}
    assert cands.provider_summaries[nic]["parent_provider_uuid"] == a
    # The candidate is directly usable as an allocation body.
    inst, proj, user = u(), u(), u()
    client.put_allocations(inst, req["allocations"], proj, user, mappings=req["mappings"])
    assert client.get_provider_usages(nic)[1] == {bw: 100}
    assert client.get_usages(proj)["INSTANCE"][bw] == 100


def test_in_process_transport_carries_headers(client):
    resp = client.request("GET", "/", microversion="1.30")
    assert resp.headers["openstack-api-version"] == "placement 1.30"
    with pytest.raises(pc.PlacementError) as ei:
        client.request("GET", "/", microversion="9.99")
    assert ei.value.status == 406
    with pytest.raises(pc.NotFound) as ei:
        client.request("GET", f"/resource_providers/{u()}/inventories")
    assert ei.value.body["errors"][0]["status"] == 404


def test_keystoneauth_session_transport(tmp_path):
    """A keystoneauth Session (token plugin, endpoint from the plugin) carries
    the same calls; its requests session is given the in-process adapter."""
    requests = pytest.importorskip("requests")
    ksa_session = pytest.importorskip("keystoneauth1.session")
    token_endpoint = pytest.importorskip("keystoneauth1.token_endpoint")
    app = targets.novella_app(f"sqlite:///{tmp_path}/placement.db")
    http = requests.Session()
    http.mount(pc.WSGI_BASE_URL, pc.WSGIAdapter(app))
    sess = ksa_session.Session(auth=token_endpoint.Token(pc.WSGI_BASE_URL, "admin"), session=http)
    client = pc.PlacementClient(session=sess)
    rp = compute_node(client, vcpu=4, mem=0, disk=0)
    assert client.get_inventories(rp)[1]["VCPU"]["total"] == 4
    assert [p["uuid"] for p in client.list_resource_providers(resources={"VCPU": 4})] == [rp]
    assert client.get_allocation_candidates({"resources": {"VCPU": 2}}).providers() == [rp]
    with pytest.raises(pc.NotFound):
        client.request("GET", f"/resource_providers/{u()}")


def test_older_microversion_client(client):
    """A client pinned below 1.19 still manages aggregates (bare-list body)."""
    old = pc.PlacementClient.__new__(pc.PlacementClient)
    old.__dict__.update(client.__dict__)
    old.microversion = "1.10"
    rp = compute_node(client, vcpu=2, mem=0, disk=0)
    agg = u()
    assert old.set_aggregates(rp, [agg]) is None
    assert client.get_aggregates(rp)[1] == [agg]
    cands = old.get_allocation_candidates({"resources": {"VCPU": 1}}, microversion="1.10")
    assert rp in [next(iter(ar["allocations"])) for ar in cands.allocation_requests]

