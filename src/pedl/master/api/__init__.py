"""Thin routers, one per resource, in Determined's /api/v1 dialect (docs/det-wire.md)."""
