"""Fixtures of the tests of pedl.common: a directory every user may enter (tasks run as other users)."""

from tests.support.shared_dirs import enterable_tmp

__all__ = ["enterable_tmp"]
