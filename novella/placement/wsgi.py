"""The placement WSGI application: middleware pipeline and routes."""
import logging
import os
import threading
import uuid

import webob
import webob.dec
import webob.exc
from microversion_parse import middleware as mp_middleware
from oslo_middleware import cors as cors_mw
from oslo_middleware import http_proxy_to_wsgi

from novella.api import router as router_mod
from novella.db import engine as engine_mod
from novella.db import migrate
from novella.placement import auth, base, conf as conf_mod, ledger as ledger_mod
from novella.placement.handlers import (
    aggregate, allocation, allocation_candidate, inventory, reshaper, resource_class,
    resource_provider, root, trait, usage)

LOG = logging.getLogger(__name__)

ROUTES = [
    ("/", {"GET": root.home}),
    ("/resource_classes", {"GET": (resource_class.list_classes, "1.2"),
                           "POST": (resource_class.create_class, "1.2")}),
    ("/resource_classes/{name}", {"GET": (resource_class.get_class, "1.2"),
                                  "PUT": (resource_class.update_class, "1.2"),
                                  "DELETE": (resource_class.delete_class, "1.2")}),
    ("/resource_providers", {"GET": resource_provider.list_providers,
                             "POST": resource_provider.create_provider}),
    ("/resource_providers/{uuid}", {"GET": resource_provider.get_provider,
                                    "PUT": resource_provider.update_provider,
                                    "DELETE": resource_provider.delete_provider}),
    ("/resource_providers/{uuid}/inventories", {
        "GET": inventory.get_inventories, "POST": inventory.create_inventory,
        "PUT": inventory.set_inventories,
        "DELETE": (inventory.delete_inventories, "1.5", 405)}),
    ("/resource_providers/{uuid}/inventories/{resource_class}", {
        "GET": inventory.get_inventory, "PUT": inventory.update_inventory,
        "DELETE": inventory.delete_inventory}),
    ("/resource_providers/{uuid}/usages", {"GET": usage.provider_usages}),
    ("/resource_providers/{uuid}/aggregates", {
        "GET": (aggregate.get_aggregates, "1.1"), "PUT": (aggregate.set_aggregates, "1.1")}),
    ("/resource_providers/{uuid}/allocations", {"GET": allocation.list_for_provider}),
    ("/resource_providers/{uuid}/traits", {
        "GET": (trait.list_provider_traits, "1.6"),
        "PUT": (trait.set_provider_traits, "1.6"),
        "DELETE": (trait.delete_provider_traits, "1.6")}),
    ("/allocations", {"POST": (allocation.post_allocations, "1.13")}),
    ("/allocations/{consumer_uuid}", {"GET": allocation.list_for_consumer,
                                      "PUT": allocation.put_allocations,
                                      "DELETE": allocation.delete_allocations}),
    ("/allocation_candidates", {"GET": (allocation_candidate.list_candidates, "1.10")}),
    ("/traits", {"GET": (trait.list_traits, "1.6")}),
    ("/traits/{name}", {"GET": (trait.get_trait, "1.6"), "PUT": (trait.put_trait, "1.6"),
                        "DELETE": (trait.delete_trait, "1.6")}),
    ("/usages", {"GET": (usage.total_usages, "1.9")}),
    ("/reshaper", {"POST": (reshaper.reshape, "1.30")}),
]


class _Faults:
    """Turn unexpected exceptions into a JSON 500."""

    def __init__(self, app):
        self.app = app

    @webob.dec.wsgify
    def __call__(self, req):
        try:
            return req.get_response(self.app)
        except webob.exc.HTTPException as exc:
            return exc
        except Exception as exc:  # noqa: BLE001 - the API must answer
            LOG.exception("placement request failed")
            return webob.exc.HTTPInternalServerError(
                "%s: %s" % (type(exc).__name__, exc),
                json_formatter=base.json_error_formatter)


class _Ledger:
    def __init__(self, app, ledger, conf):
        self.app, self.ledger, self.conf = app, ledger, conf

    def __call__(self, environ, start_response):
        environ["placement.ledger"] = self.ledger
        environ["placement.conf"] = self.conf
        return self.app(environ, start_response)


def _json_by_default(app):
    """Answer JSON (errors included) unless the client asks for something else."""
    def middleware(environ, start_response):
        accept = environ.get("HTTP_ACCEPT")
        if not accept or accept == "*/*":
            environ["HTTP_ACCEPT"] = "application/json"
        return app(environ, start_response)
    return middleware


class _ProxyHeaders:
    """oslo.middleware's HTTPProxyToWSGI environ rewrite (Forwarded,
    X-Forwarded-*), called directly: its generic wrapper introspects the
    middleware and re-wraps the response on every request."""

    def __init__(self, app, conf):
        self.app = app
        self.rewrite = http_proxy_to_wsgi.HTTPProxyToWSGI(None, conf).process_request

    def __call__(self, environ, start_response):
        self.rewrite(webob.Request(environ))
        return self.app(environ, start_response)


def _engine(url):
    url = engine_mod.normalise_url(url)
    if url in ("sqlite://", "sqlite:///:memory:"):
        # A private in-memory database per application.
        return engine_mod._create_engine(url)
    return engine_mod.get_engine(url)


def _too_large(message):
    """Placement's error document for a body over the size limit."""
    return {"errors": [{"status": 413, "title": "Request Entity Too Large", "detail": message,
                        "code": "placement.undefined_code",
                        "request_id": f"req-{uuid.uuid4()}"}]}


def make_app(conf, sync_db=True):
    """Build the placement WSGI application for a parsed ConfigOpts."""
    engine = _engine(conf.placement_database.connection)
    if sync_db and conf.placement_database.sync_on_startup:
        migrate.sync("placement", engine=engine)
    ledger = ledger_mod.Ledger(engine)
    ledger.ensure_counter()
    app = base.Router(ROUTES, conf)
    app = mp_middleware.MicroversionMiddleware(
        app, base.SERVICE_TYPE, base.VERSIONS, json_error_formatter=base.json_error_formatter)
    app = _Ledger(app, ledger, conf)
    app = _Faults(app)
    app = auth.Context(app, auth.make_enforcer(conf))
    if conf.api.auth_strategy == "noauth2":
        app = auth.NoAuth(app)
    else:
        app = auth.keystone(app, conf)
    app = router_mod.BodySizeLimit(app, router_mod.max_body_size(conf), _too_large)
    if conf.cors.allowed_origin:
        app = cors_mw.CORS(app, conf)
    app = _json_by_default(app)
    app = _ProxyHeaders(app, conf)
    app.ledger = ledger
    # Many providers in one transaction, for clients in this process
    # (PlacementClient.register_providers); not part of the HTTP API.
    app.register_providers = ledger.register_providers
    return app


def _conf_from_env():
    return conf_mod.make_conf(default_config_files=conf_mod.config_files())


class _LazyApp:
    """The module-level application, built on first request (for gunicorn)."""

    def __init__(self):
        self._app = None
        self._lock = threading.Lock()

    def __call__(self, environ, start_response):
        if self._app is None:
            with self._lock:
                if self._app is None:
                    self._app = make_app(_conf_from_env())
        return self._app(environ, start_response)


application = _LazyApp()
