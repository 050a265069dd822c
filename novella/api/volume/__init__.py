"""The Block Storage API v3 over the embedded volume service (novella.volume.api)."""
