"""v1User and the answers of the user and login routes."""

from __future__ import annotations

from pedl.master.wire.base import Pagination, WireModel


class AgentUserGroup(WireModel):
    """Who a user's tasks run as on the agents (v1AgentUserGroup)."""

    agentUid: int
    agentGid: int
    agentUser: str
    agentGroup: str


class User(WireModel):
    """v1User. `agentUserGroup` is null for a user not linked to an agent user."""

    id: int
    username: str
    admin: bool
    active: bool
    displayName: str
    remote: bool
    modifiedAt: str | None
    agentUserGroup: AgentUserGroup | None


class GetUserResponse(WireModel):
    """One user: GetUser, GetMe, PatchUser, PostUser, and a WebUI session opened."""

    user: User


class GetUsersResponse(WireModel):
    users: list[User]
    pagination: Pagination


class LoginResponse(WireModel):
    token: str
    user: User
