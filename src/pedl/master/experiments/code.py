"""An experiment's code as users download it (Determined's GET /experiments/{id}/model_def: the SDK's
download_code, `det e download-model-def`): the gzipped tar of its model directory the master stored at
create, the very archive its tasks unpack."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pedl.master.caller_cache import Caller
from pedl.master.db import models
from pedl.master.experiments.service import get
from pedl.master.tasks import model_definitions

if TYPE_CHECKING:
    from pedl.master.context import MasterContext


def model_definition(ctx: MasterContext, _who: Caller, experiment_id: int) -> bytes:
    """The archive (a .tar.gz); whoever may read the experiment may read it. An experiment stored
    without one (none is, today) gets an empty archive, a valid .tar.gz all the same."""
    with ctx.db.read_session() as s:
        get(s, experiment_id)
        stored = s.get(models.ModelDefinition, experiment_id)
        return stored.archive if stored is not None else model_definitions.files_to_tgz([])[0]


def model_definition_b64(ctx: MasterContext, who: Caller, experiment_id: int) -> str:
    return model_definitions.b64_tgz(model_definition(ctx, who, experiment_id))
