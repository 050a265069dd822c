"""The Image API v2 over the embedded image service (novella.image.api)."""
