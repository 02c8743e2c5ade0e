"""User and personal-access-token handlers of the double."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from streamwire.iggy.protocol import users as us
from streamwire.iggy.protocol.constants import Command
from tests.iggy_double.state import IggyError, SessionInfo, State, User

__all__ = ("user_handlers",)


def _record(user: User) -> us.UserRecord:
    return us.UserRecord(
        id=user.id, created_at=user.created_at, status=user.status, username=user.username
    )


def _details(user: User) -> bytes:
    return us.UserDetails(user=_record(user), permissions=user.permissions).encode()


def _me(s: SessionInfo) -> User:
    if s.user is None:  # pragma: no cover - the server only dispatches logged-in sessions
        raise IggyError(40, "not logged in")
    return s.user


def user_handlers(state: State) -> dict[int, Callable[[SessionInfo, Any], bytes]]:
    def get_user(s: SessionInfo, p: us.GetUser) -> bytes:
        try:
            return _details(state.user(p.user))
        except IggyError:
            return b""

    def get_users(s: SessionInfo, p: us.GetUsers) -> bytes:
        return us.UsersList(users=tuple(_record(u) for u in state.users)).encode()

    def create_user(s: SessionInfo, p: us.CreateUser) -> bytes:
        if not 3 <= len(p.username.encode()) <= 50:
            raise IggyError(43, p.username)
        if not 3 <= len(p.password.encode()) <= 100:
            raise IggyError(44, "password")
        return _details(state.create_user(p.username, p.password, p.status, p.permissions))

    def delete_user(s: SessionInfo, p: us.DeleteUser) -> bytes:
        user = state.user(p.user)
        if user.id == 0:
            raise IggyError(48, "root")
        state.users.remove(user)
        return b""

    def update_user(s: SessionInfo, p: us.UpdateUser) -> bytes:
        user = state.user(p.user)
        if p.username is not None:
            if any(u.username == p.username and u is not user for u in state.users):
                raise IggyError(46, p.username)
            user.username = p.username
        if p.status is not None:
            if p.status not in (1, 2):
                raise IggyError(45, str(p.status))
            user.status = p.status
        return b""

    def update_permissions(s: SessionInfo, p: us.UpdatePermissions) -> bytes:
        state.user(p.user).permissions = p.permissions
        return b""

    def change_password(s: SessionInfo, p: us.ChangePassword) -> bytes:
        user = state.user(p.user)
        if user.password != p.current_password:
            raise IggyError(42, "current password")
        user.password = p.new_password
        return b""

    def create_token(s: SessionInfo, p: us.CreatePersonalAccessToken) -> bytes:
        if not 3 <= len(p.name.encode()) <= 30:
            raise IggyError(50, p.name)
        return us.RawToken(token=state.create_token(_me(s), p.name, p.expiry)).encode()

    def delete_token(s: SessionInfo, p: us.DeletePersonalAccessToken) -> bytes:
        if _me(s).tokens.pop(p.name, None) is None:
            raise IggyError(20, p.name)
        return b""

    def get_tokens(s: SessionInfo, p: us.GetPersonalAccessTokens) -> bytes:
        infos = tuple(
            us.TokenInfo(name=name, expiry_at=expiry) for name, (_, expiry) in _me(s).tokens.items()
        )
        return us.TokensList(tokens=infos).encode()

    c = Command
    return {
        c.GET_USER: get_user,
        c.GET_USERS: get_users,
        c.CREATE_USER: create_user,
        c.DELETE_USER: delete_user,
        c.UPDATE_USER: update_user,
        c.UPDATE_PERMISSIONS: update_permissions,
        c.CHANGE_PASSWORD: change_password,
        c.CREATE_PERSONAL_ACCESS_TOKEN: create_token,
        c.DELETE_PERSONAL_ACCESS_TOKEN: delete_token,
        c.GET_PERSONAL_ACCESS_TOKENS: get_tokens,
    }
