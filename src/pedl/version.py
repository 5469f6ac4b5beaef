"""The pedl version, reported by `/info` and agents."""

__version__ = "0.1.0"
