"""pedl: a deep-learning training cluster.

Training code imports `pedl.core`; `pedl.get_cluster_info()` describes the running task.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pedl.version import __version__

if TYPE_CHECKING:
    from pedl.core.cluster_info import ClusterInfo


def get_cluster_info() -> ClusterInfo | None:
    """The running task's ClusterInfo, or None outside a task (imported lazily to keep `import pedl` light)."""
    from pedl.core.cluster_info import get_cluster_info as _get

    return _get()


__all__ = ["__version__", "get_cluster_info"]
