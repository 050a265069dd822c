"""The Compute API v2.1: ``wsgi.make_app`` builds the WSGI application."""
