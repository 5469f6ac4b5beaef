"""An in-memory provider with the full contract (tags, idempotent launch tokens, already-gone is
success, foreign ids refused) and injectable failures: what the provisioner and instance tests use
where no process or cloud should be involved. A test fixture, so it lives here and not in src."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from pedl.master.provisioner.providers.base import (
    CloudError,
    CloudErrorKind,
    CloudInstance,
    CloudState,
    ForeignInstance,
    LaunchRequest,
)


@dataclass
class MemoryInstance:
    id: str
    instance_type: str
    spot: bool
    launched_at: float
    ours: bool = True  # carries the pool's tags
    state: CloudState = CloudState.PENDING


@dataclass
class MemoryProvider:
    clock: object  # a pedl.clock.Clock
    name: str = "memory"
    instances: dict[str, MemoryInstance] = field(default_factory=dict)
    launch_errors: list[CloudError] = field(default_factory=list)  # raised by the next launches, in order
    calls: list[tuple[str, object]] = field(default_factory=list)
    _tokens: dict[str, list[CloudInstance]] = field(default_factory=dict)
    _ids: itertools.count = field(default_factory=lambda: itertools.count(1))

    def _view(self, inst: MemoryInstance) -> CloudInstance:
        return CloudInstance(inst.id, inst.instance_type, inst.state, inst.launched_at, spot=inst.spot)

    def list_instances(self) -> list[CloudInstance]:
        self.calls.append(("list", None))
        return [self._view(i) for i in self.instances.values() if i.ours]

    def launch(self, request: LaunchRequest) -> list[CloudInstance]:
        self.calls.append(("launch", request))
        if request.token in self._tokens:
            return self._tokens[request.token]
        if self.launch_errors:
            raise self.launch_errors.pop(0)
        created = []
        for _ in range(request.count):
            inst = MemoryInstance(f"m-{next(self._ids)}", request.instance_type, request.spot, self.clock.now())
            self.instances[inst.id] = inst
            created.append(self._view(inst))
        self._tokens[request.token] = created
        return created

    def terminate(self, ids: list[str]) -> None:
        self.calls.append(("terminate", list(ids)))
        for inst_id in ids:
            inst = self.instances.get(inst_id)
            if inst is not None and not inst.ours:
                raise ForeignInstance(f"{inst_id} does not carry the pool's tags")
        for inst_id in ids:
            self.instances.pop(inst_id, None)

    def close(self) -> None:
        pass

    # test controls
    def boot(self, inst_id: str) -> None:
        self.instances[inst_id].state = CloudState.RUNNING

    def add_foreign(self, inst_id: str, instance_type: str = "g4dn.xlarge") -> None:
        self.instances[inst_id] = MemoryInstance(
            inst_id, instance_type, False, self.clock.now(), ours=False, state=CloudState.RUNNING
        )

    def fail_next_launch(self, kind: CloudErrorKind, times: int = 1, code: str = "") -> None:
        self.launch_errors += [CloudError(kind, f"injected {kind}", code) for _ in range(times)]
