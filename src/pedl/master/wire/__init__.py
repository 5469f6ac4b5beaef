"""Determined's v1 messages as pedl sends them (docs/det-wire.md): pydantic models whose field names are
the camelCase keys on the wire. Domain services return them, and each router that answers one declares
its response model with `response_model_exclude_unset=True`, so an optional field pedl leaves unset is
left out of the JSON, as Determined's own master omits it. This package imports nothing from the master."""
