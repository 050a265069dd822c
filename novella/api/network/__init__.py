"""The Networking API v2.0 over the embedded network service (novella.network.api)."""
