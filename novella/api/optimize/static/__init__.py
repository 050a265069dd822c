"""The dashboard's page, style and script (package data, served by ../dashboard.py)."""
