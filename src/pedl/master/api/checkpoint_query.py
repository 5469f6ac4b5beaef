"""Determined's checkpoint listing parameters (sortByAttr, orderBy, states), shared by the experiment's
and the trial's checkpoint routes, turned into the service's sort and state filter; an unknown value
is a 400 naming the parameter."""

from __future__ import annotations

from pedl.errors import InvalidArgument
from pedl.master.lifecycle.states import CheckpointState

# checkpointv1SortBy -> the service's sort
SORTS = {
    None: "report_time",
    "": "report_time",
    "SORT_BY_UNSPECIFIED": "report_time",
    "SORT_BY_END_TIME": "report_time",
    "SORT_BY_BATCH_NUMBER": "steps",
    "SORT_BY_TRIAL_ID": "report_time",
    "SORT_BY_SEARCHER_METRIC": "searcher_metric",
    "SORT_BY_UUID": "uuid",
    "SORT_BY_STATE": "state",
}
ORDERS = {None: None, "": None, "ORDER_BY_UNSPECIFIED": None, "ORDER_BY_ASC": False, "ORDER_BY_DESC": True}
STATES = {s.value for s in CheckpointState}


def checkpoint_order(sort_by: str | None, order_by: str | None) -> tuple[str, bool | None]:
    """(the service's sort, descending: None when not asked)."""
    if sort_by not in SORTS:
        raise InvalidArgument.at("sortByAttr", f"one of {', '.join(k for k in SORTS if k)}")
    if order_by not in ORDERS:
        raise InvalidArgument.at("orderBy", "ORDER_BY_ASC or ORDER_BY_DESC")
    return SORTS[sort_by], ORDERS[order_by]


def checkpoint_states(states: list[str]) -> list[str]:
    wanted = [s for s in states if s and s != "STATE_UNSPECIFIED"]
    unknown = [s for s in wanted if s not in STATES]
    if unknown:
        raise InvalidArgument.at("states", f"unknown state {unknown[0]!r}: one of {', '.join(sorted(STATES))}")
    return wanted
