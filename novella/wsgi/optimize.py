"""The Infrastructure Optimization API (drains) as a WSGI application (nova.conf: see novella.wsgi)."""
from novella.wsgi import compute_side_application

application = compute_side_application("optimize_api_builder")
