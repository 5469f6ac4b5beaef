"""What e2e tests read of checkpoints the API lists as COMPLETED: each one's files. A checkpoint leaves
COMPLETED before anything deletes its files, so one whose files are gone has left it by then."""

from __future__ import annotations

from collections.abc import Callable

from pedl.devcluster import Master


def with_files(master: Master, listed: list[dict], has_files: Callable[[dict], bool]) -> list[dict]:
    """The checkpoints of `listed` that were COMPLETED, each with its files. One the checkpoint GC took since
    the listing (its files gone) must no longer be COMPLETED when read again: it is left out."""
    kept = []
    for ck in listed:
        if ck["state"] != "STATE_COMPLETED":
            continue
        if has_files(ck):
            kept.append(ck)
            continue
        now = master.api("GET", f"/api/v1/checkpoints/{ck['uuid']}")["checkpoint"]
        assert now["state"] != "STATE_COMPLETED", f"checkpoint {ck['uuid']} is COMPLETED but its files are gone"
    return kept
