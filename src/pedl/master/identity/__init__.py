"""Identity: users and their login sessions (users, user_lookup, user_edits), what a change of credentials
revokes (user_revocation), passwords, the failed-login limit (login_limiter), per-user limits on open work
(user_slots), who may do what (authz), and users as Determined's v1User (to_wire). A task's token is checked
by lifecycle/task_access.py."""

from typing import TYPE_CHECKING

from pedl.master.exports import lazy_exports

# ruff: noqa: F401 - these imports tell type checkers what the public names are; lazy_exports gives them at run time
if TYPE_CHECKING:
    from pedl.master.identity.authz import require_admin, require_owner, require_user
    from pedl.master.identity.login_limiter import LoginLimiter
    from pedl.master.identity.passwords import configure, dummy_hash, hash_password, normalize, verify_password
    from pedl.master.identity.user_edits import UserEdit, edit_user
    from pedl.master.identity.user_lookup import by_username
    from pedl.master.identity.user_revocation import end_tasks
    from pedl.master.identity.user_slots import Bound, Slot, UserSlots
    from pedl.master.identity.users import (
        UserPage,
        UserQuery,
        change_password,
        check_username,
        create_by,
        ensure_default_users,
        get_user,
        log_in,
        log_out,
        resolve_caller,
        user_by_id,
        users_page,
        users_with_blank_password,
    )

# each module and the public names it gives the package (master/exports.py)
__getattr__, __all__ = lazy_exports(
    __name__,
    {
        "authz": ["require_admin", "require_owner", "require_user"],
        "login_limiter": ["LoginLimiter"],
        "passwords": ["configure", "dummy_hash", "hash_password", "normalize", "verify_password"],
        "user_edits": ["UserEdit", "edit_user"],
        "user_lookup": ["by_username"],
        "user_revocation": ["end_tasks"],
        "user_slots": ["Bound", "Slot", "UserSlots"],
        "users": [
            "UserPage",
            "UserQuery",
            "change_password",
            "check_username",
            "create_by",
            "ensure_default_users",
            "get_user",
            "log_in",
            "log_out",
            "resolve_caller",
            "user_by_id",
            "users_page",
            "users_with_blank_password",
        ],
    },
)
