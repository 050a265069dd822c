"""One module per resource; each lists its ROUTES."""
