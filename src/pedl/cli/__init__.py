"""The `pedl` command line: an HTTP client of the master's REST API (Determined's /api/v1 dialect).
Entry point: `pedl.cli.main:main`; one module per resource, mirroring the master's routers."""
