"""Request body schemas, one module per resource, per microversion."""
