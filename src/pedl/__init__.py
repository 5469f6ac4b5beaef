"""pedl: a deep-learning training cluster.

Training code imports `pedl.core`; `pedl.get_cluster_info()` describes the running task.
"""

from pedl.version import __version__


def get_cluster_info():  # noqa: ANN201 - re-exported lazily to keep `import pedl` light
    from pedl.core.cluster_info import get_cluster_info as _get

    return _get()


__all__ = ["__version__", "get_cluster_info"]
