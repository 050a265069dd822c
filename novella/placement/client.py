"""A client for any Placement endpoint, spoken over its HTTP API.

Every Novella service that needs the allocation ledger (scheduler, conductor,
compute) goes through :class:`PlacementClient`. It knows nothing of Novella's
own Placement internals, so the same code drives Novella's service or the
OpenStack reference, whichever the deployment points at.

Three transports, one class:

- ``PlacementClient(endpoint="http://host:8778", token="admin")``: plain HTTP
  over a :class:`requests.Session` (connection pooling, keep-alive).
- ``PlacementClient(session=ksa_session_or_adapter)``: a keystoneauth
  session that resolves the endpoint from the catalogue and adds the token;
  a keystoneauth Adapter brings its own service type, interfaces, region
  and endpoint override (``novella.clients.placement_client`` loads one
  from ``[placement]``).
- ``PlacementClient(app=wsgi_callable)``: the all-in-one embeds Placement in
  the same process; requests are handed straight to the WSGI callable by
  :class:`WSGIAdapter` (no sockets), yet go through the same HTTP contract.

Generations: Placement guards provider data (inventory, traits, aggregates)
with a provider generation and allocations with a consumer generation. A
method given ``generation=None`` reads the current one first. A conflict
raises :class:`ConcurrentUpdate`; methods accept ``retries=N`` to re-read and
try again up to N times when the caller is content with last-writer-wins on
fresh data (a provider-generation race), never for a consumer-generation
conflict, which means someone else changed the consumer.
"""
import io
import json
import logging
import threading
import time
import typing
import urllib.parse
import uuid as uuid_mod

from keystoneauth1 import adapter as ks_adapter
import msgspec
import orjson
import requests
import requests.adapters
import requests.structures

LOG = logging.getLogger(__name__)

DEFAULT_MICROVERSION = "1.39"
CONCURRENT_UPDATE = "placement.concurrent_update"
WSGI_BASE_URL = "http://placement.in-process"


# ---------------------------------------------------------------------------
# Errors
# ---------------------------------------------------------------------------

class PlacementError(Exception):
    """A Placement response outside 2xx.

    ``status`` is the HTTP status, ``code`` the error code of the reference's
    error body (``placement.concurrent_update``, ...) when it carries one,
    ``detail`` its human text.
    """

    def __init__(self, method, path, status, code=None, detail="", body=None):
        self.method = method
        self.path = path
        self.status = status
        self.code = code
        self.detail = detail or ""
        self.body = body
        super().__init__(f"{method} {path} -> {status} {code or ''}: {self.detail}".strip())

    def __reduce__(self):  # picklable, e.g. across a process pool
        return (type(self), (self.method, self.path, self.status, self.code, self.detail, self.body))


class NotFound(PlacementError):
    pass


class Conflict(PlacementError):
    pass


class ConcurrentUpdate(Conflict):
    """A generation (provider or consumer) moved under the caller."""

    @property
    def consumer_generation(self):
        return "consumer generation conflict" in self.detail.lower()


class AllocationMoveFailed(PlacementError):
    pass


def _error_for(method, path, resp):
    code, detail, body = None, resp.text, None
    try:
        body = resp.json()
        errs = body.get("errors") or []
        if errs:
            code = errs[0].get("code")
            detail = errs[0].get("detail") or errs[0].get("title") or detail
    except ValueError:
        pass
    if resp.status_code == 404:
        cls = NotFound
    elif resp.status_code == 409:
        cls = ConcurrentUpdate if code == CONCURRENT_UPDATE else Conflict
    else:
        cls = PlacementError
    return cls(method, path, resp.status_code, code, detail, body)


# ---------------------------------------------------------------------------
# In-process transport
# ---------------------------------------------------------------------------

def _query_string(params):
    """``params`` encoded as requests encodes them (lists repeated, None left out)."""
    if not params:
        return ""
    if isinstance(params, str):
        return params
    pairs = []
    for key, values in (params.items() if isinstance(params, dict) else params):
        if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
            values = [values]
        pairs += [(key, v) for v in values if v is not None]
    return urllib.parse.urlencode(pairs)


class WSGIAdapter(requests.adapters.BaseAdapter):
    """A requests transport adapter that calls a WSGI application directly.

    Mounted on a ``requests.Session`` it turns each prepared request into a
    WSGI environ, runs the application in the calling thread and builds a
    :class:`requests.Response` from what it returns. No socket is opened, so
    the embedded service costs a function call, not a round trip.
    """

    def __init__(self, app, script_name=""):
        super().__init__()
        self.app = app
        self.script_name = script_name.rstrip("/")

    def send(self, request, stream=False, timeout=None, verify=True, cert=None, proxies=None):
        return self.call(request.method, request.url, request.headers, request.body,
                         request=request)

    def call(self, method, full_url, headers, body, request=None):
        """The app's response to one request, as a :class:`requests.Response`."""
        url = urllib.parse.urlsplit(full_url)
        body = body or b""
        if isinstance(body, str):
            body = body.encode("utf-8")
        path = urllib.parse.unquote(url.path or "/")
        if self.script_name and path.startswith(self.script_name):
            path = path[len(self.script_name):] or "/"
        environ = {
            "REQUEST_METHOD": method,
            "SCRIPT_NAME": self.script_name,
            "PATH_INFO": path,
            "QUERY_STRING": url.query,
            "SERVER_NAME": url.hostname or "localhost",
            "SERVER_PORT": str(url.port or (443 if url.scheme == "https" else 80)),
            "SERVER_PROTOCOL": "HTTP/1.1",
            "REMOTE_ADDR": "127.0.0.1",
            "CONTENT_LENGTH": str(len(body)),
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": url.scheme or "http",
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": io.StringIO(),
            "wsgi.multithread": True,
            "wsgi.multiprocess": False,
            "wsgi.run_once": False,
        }
        for name, value in headers.items():
            key = name.upper().replace("-", "_")
            if key == "CONTENT_TYPE":
                environ["CONTENT_TYPE"] = value
            elif key != "CONTENT_LENGTH":
                environ["HTTP_" + key] = value
        environ["HTTP_HOST"] = url.netloc

        captured = {}

        def start_response(status, headers, exc_info=None):
            captured["status"] = status
            captured["headers"] = headers
            return lambda data: captured.setdefault("written", []).append(data)

        result = self.app(environ, start_response)
        try:
            chunks = captured.pop("written", []) + [c for c in result]
        finally:
            close = getattr(result, "close", None)
            if close:
                close()

        resp = requests.Response()
        resp.status_code = int(captured["status"].split(" ", 1)[0])
        resp.reason = captured["status"].split(" ", 1)[1] if " " in captured["status"] else ""
        resp.headers = requests.structures.CaseInsensitiveDict(captured["headers"])
        resp._content = b"".join(chunks)
        resp.raw = io.BytesIO(resp._content)
        resp.encoding = requests.utils.get_encoding_from_headers(resp.headers)
        resp.url = full_url
        resp.request = request
        resp.connection = self
        return resp

    def close(self):
        pass


# ---------------------------------------------------------------------------
# Request groups and candidates
# ---------------------------------------------------------------------------

class RequestGroup:
    """One group of an allocation-candidates query.

    ``suffix`` is ``""`` for the unnumbered group, else a granular suffix
    (``"1"``, ``"_NET"``...). ``required`` lists traits, a trait prefixed
    ``!`` being forbidden; ``any_traits`` lists sets of which one must be
    present (``required=in:A,B``); ``member_of`` lists aggregate sets, each
    set meaning any-of, a set of one ``!uuid`` forbidding it; ``in_tree`` a
    provider uuid.
    """

    def __init__(self, resources=None, required=None, any_traits=None,
                 member_of=None, in_tree=None, suffix=""):
        self.suffix = suffix
        self.resources = dict(resources or {})
        self.required = list(required or [])
        self.any_traits = [list(s) for s in (any_traits or [])]
        self.member_of = [list(s) if not isinstance(s, str) else [s] for s in (member_of or [])]
        self.in_tree = in_tree

    @classmethod
    def from_dict(cls, d):
        if isinstance(d, cls):
            return d
        return cls(resources=d.get("resources"), required=d.get("required"),
                   any_traits=d.get("any_traits"), member_of=d.get("member_of"),
                   in_tree=d.get("in_tree"), suffix=d.get("suffix", ""))

    def query(self):
        """(key, value) pairs for this group's query string."""
        s = self.suffix
        q = []
        if self.resources:
            q.append(("resources" + s, ",".join(f"{rc}:{amt}" for rc, amt in sorted(self.resources.items()))))
        if self.required:
            q.append(("required" + s, ",".join(self.required)))
        for traits in self.any_traits:
            q.append(("required" + s, "in:" + ",".join(traits)))
        for aggs in self.member_of:
            if len(aggs) == 1:
                q.append(("member_of" + s, aggs[0]))
            else:
                q.append(("member_of" + s, "in:" + ",".join(aggs)))
        if self.in_tree:
            q.append(("in_tree" + s, self.in_tree))
        return q


class _Figures(msgspec.Struct, frozen=True):
    capacity: typing.Union[int, float]
    used: typing.Union[int, float]


class _Sizes(msgspec.Struct, frozen=True):
    """The resource classes a scheduler's host state is made of; a summary's
    others are skipped, not decoded."""
    VCPU: typing.Optional[_Figures] = None
    MEMORY_MB: typing.Optional[_Figures] = None
    DISK_GB: typing.Optional[_Figures] = None


_NO_TRAITS = msgspec.Raw(b"[]")


class ProviderSummary(msgspec.Struct, frozen=True):
    """A provider's summary as the scheduler reads it: the capacity and use of
    the classes in ``_Sizes``, its tree, and its traits left encoded (JSON:
    ``traits_of`` decodes them when a filter asks)."""
    resources: _Sizes = _Sizes()
    traits: msgspec.Raw = _NO_TRAITS
    root_provider_uuid: typing.Optional[str] = None
    parent_provider_uuid: typing.Optional[str] = None


def traits_of(summary_traits):
    """The traits a ``ProviderSummary.traits`` names, as a list."""
    return msgspec.json.decode(summary_traits)


class CandidateRequest(msgspec.Struct, frozen=True):
    """One allocation request with its providers' uuids read and the rest left
    encoded: of up to ``[scheduler] max_placement_results`` of them a
    scheduler wants the one it claims and the alternates it hands on, which
    ``decoded`` gives as placement sent them."""
    allocations: typing.Dict[str, msgspec.Raw]
    mappings: typing.Union[msgspec.Raw, msgspec.UnsetType] = msgspec.UNSET

    def decoded(self):
        """``{"allocations": {rp_uuid: {"resources": {...}}}, "mappings": {...}}``
        (mappings when placement sent them), ready for PUT /allocations."""
        out = {"allocations": {rp: msgspec.json.decode(raw)
                               for rp, raw in self.allocations.items()}}
        if self.mappings is not msgspec.UNSET:
            out["mappings"] = msgspec.json.decode(self.mappings)
        return out


class _Candidates(msgspec.Struct):
    allocation_requests: typing.List[CandidateRequest] = []
    provider_summaries: typing.Dict[str, ProviderSummary] = {}


_DECODE_CANDIDATES = msgspec.json.Decoder(_Candidates).decode


class AllocationCandidates:
    """The answer of GET /allocation_candidates, read twice over as wanted.

    For the scheduler, which reads up to ``[scheduler] max_placement_results``
    candidates on every request, ``requests`` (``CandidateRequest``) and
    ``summaries`` (``ProviderSummary`` by provider uuid) are decoded at once
    and hold only what it reads: about half the work of decoding the whole
    answer (docs/dependencies.md). The whole answer, as plain JSON
    values, is decoded when first asked for: ``allocation_requests``, a list
    of ``{"allocations": {rp_uuid: {"resources": {...}}}, "mappings": {...}}``
    ready for PUT/POST /allocations, and ``provider_summaries``, each
    provider's summary (``resources`` with capacity/used, ``traits``,
    ``parent_provider_uuid``, ``root_provider_uuid``).
    """

    def __init__(self, body, microversion=None):
        """``body``: the answer as received (bytes) or as decoded (a dict)."""
        if not isinstance(body, (bytes, bytearray, memoryview)):
            body = orjson.dumps(body)
        if microversion is None or not version_ge(microversion, "1.12"):
            plain = orjson.loads(body)
            plain["allocation_requests"] = [
                self._normalise(ar) for ar in plain.get("allocation_requests", [])]
            body = orjson.dumps(plain)
        # else already the shape: no look at each of up to 1000 candidates
        self.content = body
        lean = _DECODE_CANDIDATES(body)
        self.requests = lean.allocation_requests
        self.summaries = lean.provider_summaries
        self._plain = None

    @staticmethod
    def _normalise(ar):
        allocs = ar.get("allocations", {})
        if isinstance(allocs, dict) and len(ar) == (2 if "mappings" in ar else 1):
            return ar  # already the shape (1.12 and later)
        if isinstance(allocs, list):  # microversions before 1.12
            allocs = {a["resource_provider"]["uuid"]: {"resources": a["resources"]} for a in allocs}
        out = {"allocations": allocs}
        if "mappings" in ar:
            out["mappings"] = ar["mappings"]
        return out

    def _whole(self):
        if self._plain is None:
            self._plain = orjson.loads(self.content)
        return self._plain

    @property
    def allocation_requests(self):
        return self._whole().get("allocation_requests", [])

    @property
    def provider_summaries(self):
        return self._whole().get("provider_summaries", {})

    def __len__(self):
        return len(self.requests)

    def providers(self):
        """Root providers (hosts) appearing in the candidates, in order."""
        seen = {}
        summaries = self.summaries
        for ar in self.requests:
            for rp in ar.allocations:
                summary = summaries.get(rp)
                seen.setdefault(summary.root_provider_uuid or rp if summary else rp)
        return list(seen)


def _resources_only(allocations):
    """Accept {rp: {"resources": {...}}} or {rp: {...}}; return the former."""
    out = {}
    for rp, value in (allocations or {}).items():
        res = value.get("resources", value) if isinstance(value, dict) else value
        if res:
            out[rp] = {"resources": dict(res)}
    return out


# ---------------------------------------------------------------------------
# The client
# ---------------------------------------------------------------------------

class PlacementClient:
    """Talks to one Placement endpoint; safe to share between threads.

    :param endpoint: base URL (``http://127.0.0.1:8778``); with ``token``
        sent as ``x-auth-token``.
    :param session: instead of endpoint/token, a keystoneauth ``Session`` or
        ``Adapter`` (anything with ``request(url, method, **kw)`` that
        resolves the endpoint itself through ``endpoint_filter``).
    :param app: instead of both, a WSGI application to call in-process.
    :param microversion: default ``OpenStack-API-Version`` for every call;
        each method takes ``microversion=`` to override it.
    :param retries: default number of retries on ``placement.concurrent_update``
        for methods that re-read the generation (0: surface every conflict).
    """

    def __init__(self, endpoint=None, token=None, session=None, app=None,
                 microversion=DEFAULT_MICROVERSION, retries=0, timeout=60,
                 interface="internal", region_name=None, retry_delay=0.01):
        if sum(x is not None for x in (endpoint, session, app)) != 1:
            raise ValueError("give exactly one of endpoint, session or app")
        self.microversion = microversion
        self.retries = retries
        self.retry_delay = retry_delay
        self.timeout = timeout
        self._ksa = None
        self._wsgi = None
        self._local = threading.local()
        if isinstance(session, ks_adapter.Adapter):
            self._ksa = session
            self._endpoint_filter = {}  # the adapter fills it from its own options
            self.base_url = ""
        elif session is not None and not isinstance(session, requests.Session):
            self._ksa = session
            self._endpoint_filter = {"service_type": "placement", "interface": interface}
            if region_name:
                self._endpoint_filter["region_name"] = region_name
            self.base_url = ""
        else:
            self.http = session if session is not None else requests.Session()
            if app is not None:
                self.base_url = WSGI_BASE_URL
                # Requests go straight to the adapter (``request``): a session's
                # cookies, hooks and environment add nothing in-process. It is
                # still mounted for callers that use ``http`` themselves.
                self._wsgi = WSGIAdapter(app)
                self.http.mount(WSGI_BASE_URL, self._wsgi)
                self.http.trust_env = False
            else:
                self.base_url = (endpoint or "").rstrip("/")
                # Enough pooled connections for a thread pool sharing the client.
                adapter = requests.adapters.HTTPAdapter(pool_connections=4, pool_maxsize=32)
                self.http.mount("http://", adapter)
                self.http.mount("https://", adapter)
            self.http.headers["Accept"] = "application/json"
            if token:
                self.http.headers["x-auth-token"] = token

    # -- plumbing ----------------------------------------------------------

    def request(self, method, path, json_body=None, params=None, microversion=None,
                headers=None, ok=(200, 201, 202, 204)):
        """Send one request; return the response, raise PlacementError if not ok."""
        hdrs = {"OpenStack-API-Version": "placement " + (microversion or self.microversion)}
        if headers:
            hdrs.update(headers)
        kwargs = {"headers": hdrs, "params": params}
        if json_body is not None:
            kwargs["data"] = json.dumps(json_body)
            hdrs["Content-Type"] = "application/json"
        if self._ksa is not None:
            resp = self._ksa.request(path, method, endpoint_filter=self._endpoint_filter,
                                     raise_exc=False, **kwargs)
        elif self._wsgi is not None:
            query = _query_string(params)
            resp = self._wsgi.call(method, self.base_url + path + (f"?{query}" if query else ""),
                                   {**self.http.headers, **hdrs}, kwargs.get("data"))
        else:
            resp = self.http.request(method, self.base_url + path, timeout=self.timeout, **kwargs)
        if resp.status_code not in ok:
            raise _error_for(method, path, resp)
        return resp

    def _json(self, method, path, **kw):
        resp = self.request(method, path, **kw)
        if resp.status_code == 204 or not resp.content:
            return None
        # orjson: a large answer (a listing of thousands of providers) is
        # decoded several times faster than by the standard decoder.
        return orjson.loads(resp.content)

    def get(self, path, **kw):
        return self._json("GET", path, **kw)

    def _retrying(self, retries, fn):
        """Call fn() again on ConcurrentUpdate, up to ``retries`` more times."""
        retries = self.retries if retries is None else retries
        attempt = 0
        while True:
            try:
                return fn()
            except ConcurrentUpdate as exc:
                if attempt >= retries or exc.consumer_generation:
                    raise
                attempt += 1
                LOG.debug("retrying after %s (attempt %d)", exc, attempt)
                time.sleep(self.retry_delay * attempt)

    def close(self):
        if self._ksa is None:
            self.http.close()

    # -- root ---------------------------------------------------------------

    def versions(self):
        """The root document's version (min_version, max_version...)."""
        body = self.get("/", microversion="1.0")
        return body["versions"][0]

    # -- resource providers -------------------------------------------------

    def get_resource_provider(self, rp_uuid):
        """The provider as a dict, or None when it does not exist."""
        try:
            return self.get(f"/resource_providers/{rp_uuid}")
        except NotFound:
            return None

    def create_resource_provider(self, rp_uuid=None, name=None, parent_provider_uuid=None):
        body = {"name": name or str(rp_uuid), "uuid": str(rp_uuid or uuid_mod.uuid4())}
        if parent_provider_uuid:
            body["parent_provider_uuid"] = str(parent_provider_uuid)
        resp = self.request("POST", "/resource_providers", json_body=body)
        if resp.content:
            return resp.json()
        return self.get_resource_provider(body["uuid"])

    def ensure_resource_provider(self, rp_uuid, name=None, parent_provider_uuid=None):
        """Return the provider, creating it (under its parent) if missing.

        Two callers racing to create the same provider both get it back: the
        loser's 409 is answered by reading what the winner made.
        """
        rp = self.get_resource_provider(rp_uuid)
        if rp is not None:
            return rp
        try:
            return self.create_resource_provider(rp_uuid, name, parent_provider_uuid)
        except Conflict:
            rp = self.get_resource_provider(rp_uuid)
            if rp is None:
                raise
            return rp

    def register_providers(self, providers):
        """Create root providers with their inventories and traits:
        ``[{"uuid", "name", "inventories": {rc: {...}}, "traits": [...]}]``
        (what many compute hosts starting together report). One that exists
        already under its uuid is left as it is. Returns, for each provider
        that exists now under its uuid, ``{uuid: {"generation", "inventories",
        "traits", "created"}}`` (what it holds; ``created``: made by this call).

        Over HTTP each provider takes three requests (Placement's API has no
        batch create; one that exists, three reads). An embedded application
        that offers ``register_providers`` (Novella's own, in the all-in-one)
        does it all in one transaction instead.
        """
        self.ensure_traits(sorted({t for d in providers for t in d["traits"]}))
        bulk = getattr(self._wsgi.app, "register_providers", None) if self._wsgi else None
        if bulk is not None:
            return bulk(providers)
        out = {}
        for d in providers:
            try:
                rp = self.create_resource_provider(d["uuid"], d["name"])
            except Conflict:
                if self.get_resource_provider(d["uuid"]) is None:
                    continue  # the name is another provider's
                _gen, inventories = self.get_inventories(d["uuid"])
                gen, traits = self.get_traits(d["uuid"])
                out[d["uuid"]] = {"generation": gen, "inventories": inventories,
                                  "traits": traits, "created": False}
                continue
            gen = self.set_inventory(d["uuid"], d["inventories"], generation=rp["generation"])
            gen = self.set_traits(d["uuid"], d["traits"], generation=gen)
            out[d["uuid"]] = {"generation": gen, "inventories": self.get_inventories(d["uuid"])[1],
                              "traits": sorted(set(d["traits"])), "created": True}
        return out

    def update_resource_provider(self, rp_uuid, name, parent_provider_uuid=None):
        """Rename a provider or give it a parent (re-parenting needs 1.37)."""
        body = {"name": name}
        if parent_provider_uuid:
            body["parent_provider_uuid"] = str(parent_provider_uuid)
        return self._json("PUT", f"/resource_providers/{rp_uuid}", json_body=body)

    def delete_resource_provider(self, rp_uuid):
        """Delete a provider; False if it was already gone."""
        try:
            self.request("DELETE", f"/resource_providers/{rp_uuid}")
            return True
        except NotFound:
            return False

    def list_resource_providers(self, name=None, uuid=None, member_of=None, required=None,
                                resources=None, in_tree=None, microversion=None):
        """Providers matching the filters (the reference's query parameters).

        ``member_of``: a list of aggregate sets (each any-of, ``!`` forbids);
        ``required``: traits (``!`` forbids); ``resources``: {rc: amount}.
        """
        params = []
        if name:
            params.append(("name", name))
        if uuid:
            params.append(("uuid", str(uuid)))
        for aggs in member_of or []:
            aggs = [aggs] if isinstance(aggs, str) else list(aggs)
            params.append(("member_of", aggs[0] if len(aggs) == 1 else "in:" + ",".join(aggs)))
        if required:
            params.append(("required", ",".join(required)))
        if resources:
            params.append(("resources", ",".join(f"{k}:{v}" for k, v in sorted(resources.items()))))
        if in_tree:
            params.append(("in_tree", str(in_tree)))
        return self.get("/resource_providers", params=params, microversion=microversion)["resource_providers"]

    def _generation(self, rp_uuid):
        rp = self.get(f"/resource_providers/{rp_uuid}")
        return rp["generation"]

    # -- inventories ---------------------------------------------------------

    def get_inventories(self, rp_uuid):
        """(provider generation, {rc: inventory dict})."""
        body = self.get(f"/resource_providers/{rp_uuid}/inventories")
        return body["resource_provider_generation"], body["inventories"]

    def set_inventory(self, rp_uuid, inventories, generation=None, retries=None):
        """Replace the provider's whole inventory; return the new generation.

        ``inventories`` maps resource class to either a total (int) or a dict
        of total/reserved/min_unit/max_unit/step_size/allocation_ratio.
        """
        inv = {rc: ({"total": v} if isinstance(v, int) else dict(v)) for rc, v in inventories.items()}

        def attempt(gen):
            if gen is None:
                gen = self._generation(rp_uuid)
            body = {"resource_provider_generation": gen, "inventories": inv}
            return self._json("PUT", f"/resource_providers/{rp_uuid}/inventories",
                              json_body=body)["resource_provider_generation"]

        return self._with_generation(generation, retries, attempt)

    def _with_generation(self, generation, retries, attempt):
        """Run attempt(gen): first with the caller's generation, then fresh."""
        state = {"gen": generation}

        def call():
            try:
                return attempt(state["gen"])
            finally:
                state["gen"] = None  # a retry reads the current generation
        return self._retrying(retries, call)

    def delete_inventory(self, rp_uuid, resource_class, generation=None, retries=None):
        """Drop one resource class from the inventory; return the new generation."""
        def attempt(gen):
            current, inv = self.get_inventories(rp_uuid)
            if resource_class not in inv:
                return current
            inv.pop(resource_class)
            body = {"resource_provider_generation": current if gen is None else gen,
                    "inventories": inv}
            return self._json("PUT", f"/resource_providers/{rp_uuid}/inventories",
                              json_body=body)["resource_provider_generation"]
        return self._with_generation(generation, retries, attempt)

    # -- resource classes and traits ---------------------------------------

    def ensure_resource_class(self, name):
        """Create a CUSTOM_ resource class if needed (idempotent PUT, 1.7)."""
        self.request("PUT", f"/resource_classes/{name}", microversion=max_version(self.microversion, "1.7"))

    def ensure_traits(self, traits):
        """Create the CUSTOM_ traits among ``traits`` (idempotent PUT)."""
        for t in traits:
            if t.startswith("CUSTOM_"):
                self.request("PUT", f"/traits/{t}", microversion=max_version(self.microversion, "1.6"))

    def get_traits(self, rp_uuid):
        """(provider generation, sorted trait names)."""
        body = self.get(f"/resource_providers/{rp_uuid}/traits")
        return body["resource_provider_generation"], sorted(body["traits"])

    def set_traits(self, rp_uuid, traits, generation=None, retries=None):
        """Replace the provider's traits (custom ones created); return the new generation."""
        traits = sorted(set(traits))
        self.ensure_traits(traits)

        def attempt(gen):
            if gen is None:
                gen = self._generation(rp_uuid)
            body = {"resource_provider_generation": gen, "traits": traits}
            return self._json("PUT", f"/resource_providers/{rp_uuid}/traits",
                              json_body=body)["resource_provider_generation"]
        return self._with_generation(generation, retries, attempt)

    # -- aggregates --------------------------------------------------------

    def get_aggregates(self, rp_uuid):
        """(provider generation, sorted aggregate uuids) — generation from 1.19."""
        body = self.get(f"/resource_providers/{rp_uuid}/aggregates")
        return body.get("resource_provider_generation"), sorted(body["aggregates"])

    def set_aggregates(self, rp_uuid, aggregates, generation=None, retries=None):
        """Replace the provider's aggregates; return the new generation."""
        aggs = sorted({str(a) for a in aggregates})

        def attempt(gen):
            if not version_ge(self.microversion, "1.19"):
                # Before 1.19 the body is the bare list and nothing guards it.
                self._json("PUT", f"/resource_providers/{rp_uuid}/aggregates", json_body=aggs)
                return None
            if gen is None:
                gen = self._generation(rp_uuid)
            body = {"resource_provider_generation": gen, "aggregates": aggs}
            return self._json("PUT", f"/resource_providers/{rp_uuid}/aggregates",
                              json_body=body).get("resource_provider_generation")
        return self._with_generation(generation, retries, attempt)

    # -- allocations ---------------------------------------------------------

    def get_allocations(self, consumer_uuid):
        """The consumer's allocations, generation and owner.

        Returns ``{"allocations": {rp: {"resources": {...}, "generation": n}},
        "consumer_generation": g or None, "project_id", "user_id",
        "consumer_type"}``; an unknown consumer has empty allocations.
        """
        return self.get(f"/allocations/{consumer_uuid}")

    def get_provider_allocations(self, rp_uuid):
        """{consumer uuid: {"resources": {...}}} held against a provider."""
        return self.get(f"/resource_providers/{rp_uuid}/allocations")["allocations"]

    def put_allocations(self, consumer_uuid, allocations, project_id, user_id,
                        consumer_generation=None, consumer_type="INSTANCE", mappings=None,
                        retries=None, microversion=None):
        """Replace a consumer's allocations in one transaction.

        ``consumer_generation`` is None for a new consumer, else the value
        last read; ``retries`` re-sends on a provider-generation race only.
        """
        mv = microversion or self.microversion
        body = {"allocations": _resources_only(allocations),
                "project_id": project_id, "user_id": user_id}
        if version_ge(mv, "1.28"):
            body["consumer_generation"] = consumer_generation
        if version_ge(mv, "1.38"):
            body["consumer_type"] = consumer_type
        if mappings and version_ge(mv, "1.34"):
            body["mappings"] = mappings
        self._retrying(retries, lambda: self.request(
            "PUT", f"/allocations/{consumer_uuid}", json_body=body, microversion=mv))
        return True

    def post_allocations(self, payload, retries=None, microversion=None):
        """POST /allocations: several consumers written atomically.

        ``payload`` maps consumer uuid to ``{"allocations": ..., "project_id",
        "user_id", "consumer_generation", "consumer_type"}``; an empty
        ``allocations`` removes that consumer's allocations.
        """
        mv = microversion or self.microversion
        body = {}
        for consumer, entry in payload.items():
            e = dict(entry)
            e["allocations"] = _resources_only(e.get("allocations"))
            if not version_ge(mv, "1.28"):
                e.pop("consumer_generation", None)
            else:
                e.setdefault("consumer_generation", None)
            if version_ge(mv, "1.38"):
                e.setdefault("consumer_type", "INSTANCE")
            else:
                e.pop("consumer_type", None)
            if not version_ge(mv, "1.34"):
                e.pop("mappings", None)
            body[str(consumer)] = e
        self._retrying(retries, lambda: self.request(
            "POST", "/allocations", json_body=body, microversion=mv))
        return True

    def move_allocations(self, source_consumer, target_consumer, target_consumer_type="MIGRATION",
                         retries=None):
        """Hand every allocation of ``source_consumer`` to ``target_consumer``.

        One POST /allocations empties the source and writes the target, so
        the resources are never free nor counted twice in between (used to
        give an instance's allocation to its migration record, and back on
        revert). Any allocation the target already held is replaced. Returns
        False when the source holds nothing. A consumer changed concurrently
        raises :class:`AllocationMoveFailed`; a provider-generation race is
        retried ``retries`` times with fresh reads.
        """
        def payload(src, dst):
            return {
                str(source_consumer): {
                    "allocations": {},
                    "project_id": src["project_id"], "user_id": src["user_id"],
                    "consumer_generation": src.get("consumer_generation"),
                    "consumer_type": src.get("consumer_type") or "INSTANCE",
                },
                str(target_consumer): {
                    "allocations": src["allocations"],
                    "project_id": src["project_id"], "user_id": src["user_id"],
                    "consumer_generation": dst.get("consumer_generation"),
                    "consumer_type": (dst.get("consumer_type") if dst.get("allocations")
                                      else None) or target_consumer_type,
                },
            }

        def attempt():
            src = self.get_allocations(source_consumer)
            if not src.get("allocations"):
                return False
            # The target is a new consumer in nearly every move (a migration's
            # record, an instance whose allocation went to it): written as one
            # without being read, and read only when placement says it exists.
            try:
                self.post_allocations(payload(src, {}))
            except ConcurrentUpdate as exc:
                if not exc.consumer_generation:
                    raise
                dst = self.get_allocations(target_consumer)
                if dst.get("consumer_generation") is None:
                    raise  # the target is new: the source changed meanwhile
                LOG.info("consumer %s already holds allocations; replacing them with %s's",
                         target_consumer, source_consumer)
                self.post_allocations(payload(src, dst))
            return True

        try:
            return self._retrying(retries, attempt)
        except ConcurrentUpdate as exc:
            raise AllocationMoveFailed(exc.method, exc.path, exc.status, exc.code,
                                       exc.detail, exc.body) from exc

    def delete_allocations(self, consumer_uuid):
        """Remove every allocation of the consumer; False if it had none."""
        try:
            self.request("DELETE", f"/allocations/{consumer_uuid}")
            return True
        except NotFound:
            return False

    # -- allocation candidates ----------------------------------------------

    def get_allocation_candidates(self, groups, limit=None, group_policy=None,
                                  same_subtree=None, root_required=None, microversion=None):
        """Query candidates for a request made of groups.

        ``groups``: a :class:`RequestGroup`, a dict of its fields, or a list
        of them (the unsuffixed group plus granular ones). ``same_subtree`` is
        a list of suffix lists; ``root_required`` a list of traits (``!``
        forbids). Returns :class:`AllocationCandidates`.
        """
        if isinstance(groups, (dict, RequestGroup)):
            groups = [groups]
        params = []
        for g in groups:
            params.extend(RequestGroup.from_dict(g).query())
        if limit is not None:
            params.append(("limit", str(int(limit))))
        if group_policy:
            params.append(("group_policy", group_policy))
        for suffixes in same_subtree or []:
            params.append(("same_subtree", ",".join(suffixes)))
        if root_required:
            params.append(("root_required", ",".join(root_required)))
        microversion = microversion or self.microversion
        resp = self.request("GET", "/allocation_candidates", params=params,
                            microversion=microversion)
        return AllocationCandidates(resp.content, microversion)

    # -- usages ------------------------------------------------------------

    def get_provider_usages(self, rp_uuid):
        """(provider generation, {rc: used})."""
        body = self.get(f"/resource_providers/{rp_uuid}/usages")
        return body.get("resource_provider_generation"), body["usages"]

    def get_usages(self, project_id, user_id=None, consumer_type=None, microversion=None):
        """Totals for a project (and user). From 1.38 the answer is grouped
        by consumer type: ``{type: {"consumer_count": n, rc: used...}}``."""
        params = [("project_id", project_id)]
        if user_id:
            params.append(("user_id", user_id))
        if consumer_type:
            params.append(("consumer_type", consumer_type))
        return self.get("/usages", params=params, microversion=microversion)["usages"]

    # -- reshaper -----------------------------------------------------------

    def reshape(self, inventories, allocations, microversion=None):
        """POST /reshaper (1.30+): move inventory and allocations in one go."""
        body = {"inventories": inventories, "allocations": allocations}
        self.request("POST", "/reshaper", json_body=body,
                     microversion=microversion or max_version(self.microversion, "1.30"))


def _parse(v):
    major, minor = v.split(".")
    return int(major), int(minor)


def version_ge(a, b):
    return _parse(a) >= _parse(b)


def max_version(a, b):
    return a if version_ge(a, b) else b
