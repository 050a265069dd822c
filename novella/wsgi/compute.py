"""The Compute API v2.1 as a WSGI application (nova.conf: see ``novella.wsgi``)."""
from novella.wsgi import compute_side_application

application = compute_side_application("compute_api_builder")
