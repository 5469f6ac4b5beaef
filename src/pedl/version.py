"""The pedl version, reported by `/info` and agents."""

__version__ = "0.1.0"

# The Determined release whose REST dialect the master speaks: what it reports as `version` to det
# (det warns whenever the master's version differs from its own); pedl's own is `pedlVersion`
# (docs/det-wire.md, "Versions").
DETERMINED_API_VERSION = "0.38.1"
