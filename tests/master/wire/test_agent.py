"""v1Agent's parts: a free slot keeps its null container, and an unreported device memory stays out."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from pedl.master.wire.agent import Device, GetSlotResponse, Slot


def test_a_free_slot_sends_its_container_as_null() -> None:
    slot = Slot(
        id="s0",
        enabled=True,
        draining=False,
        device=Device(id=0, type="TYPE_CPU", brand="CPU", uuid=""),
        container=None,
    )
    assert GetSlotResponse(slot=slot).model_dump(exclude_unset=True)["slot"] == {
        "id": "s0",
        "enabled": True,
        "draining": False,
        "container": None,
        "device": {"id": 0, "type": "TYPE_CPU", "brand": "CPU", "uuid": ""},
    }


def test_a_slot_must_say_whether_it_is_held() -> None:
    with pytest.raises(ValidationError, match="container"):
        Slot.model_validate(
            {
                "id": "s0",
                "enabled": True,
                "draining": False,
                "device": {"id": 0, "type": "TYPE_CPU", "brand": "CPU", "uuid": ""},
            }
        )
