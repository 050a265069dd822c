"""The embedded volume service's HTTP API as a WSGI application (nova.conf: see novella.wsgi)."""
from novella.wsgi import compute_side_application

application = compute_side_application("embedded_api_builder", "volume")
