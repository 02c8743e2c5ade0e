"""Consumer-group, user and token management of the Iggy client (a mixin of ``Client``)."""

from __future__ import annotations

import contextlib
from typing import TypeVar

from streamwire.iggy._options import topic_of
from streamwire.iggy.protocol import groups as gr
from streamwire.iggy.protocol import users as us
from streamwire.iggy.protocol._wire import RequestPayload
from streamwire.iggy.protocol.constants import U64_MAX
from streamwire.iggy.protocol.errors import (
    CONSUMER_GROUP_MISSING,
    ConsumerGroupNameAlreadyExists,
)
from streamwire.iggy.protocol.identifiers import Identifier, IdentifierLike

__all__ = ("AdminMixin",)

R = TypeVar("R")


class AdminMixin:
    """Needs ``request``; :class:`~streamwire.iggy.client.Client` provides it."""

    async def request(self, payload: RequestPayload[R], *, timeout: float | None = None) -> R:
        raise NotImplementedError  # pragma: no cover

    # --- consumer groups -----------------------------------------------------------------

    async def create_consumer_group(
        self, address: str, name: str, *, exist_ok: bool = False
    ) -> gr.ConsumerGroupDetails | None:
        stream, topic = topic_of(address)
        try:
            return await self.request(gr.CreateConsumerGroup(stream, topic, name))
        except ConsumerGroupNameAlreadyExists:
            if not exist_ok:
                raise
            return await self.consumer_group(address, name)

    async def delete_consumer_group(
        self, address: str, name: IdentifierLike, *, missing_ok: bool = False
    ) -> None:
        stream, topic = topic_of(address)
        with contextlib.suppress(*(CONSUMER_GROUP_MISSING if missing_ok else ())):
            await self.request(gr.DeleteConsumerGroup(stream, topic, Identifier.of(name)))

    async def consumer_group(
        self, address: str, name: IdentifierLike
    ) -> gr.ConsumerGroupDetails | None:
        stream, topic = topic_of(address)
        return await self.request(gr.GetConsumerGroup(stream, topic, Identifier.of(name)))

    async def consumer_groups(self, address: str) -> list[gr.ConsumerGroupRecord]:
        stream, topic = topic_of(address)
        return list((await self.request(gr.GetConsumerGroups(stream, topic))).groups)

    # --- users and tokens ----------------------------------------------------------------

    async def create_user(
        self,
        username: str,
        password: str,
        *,
        active: bool = True,
        permissions: us.Permissions | None = None,
    ) -> us.UserDetails:
        status = us.UserStatus.ACTIVE if active else us.UserStatus.INACTIVE
        request = us.CreateUser(
            username=username, password=password, status=status, permissions=permissions
        )
        return await self.request(request)

    async def delete_user(self, user: IdentifierLike) -> None:
        await self.request(us.DeleteUser(Identifier.of(user)))

    async def user(self, user: IdentifierLike) -> us.UserDetails | None:
        return await self.request(us.GetUser(Identifier.of(user)))

    async def users(self) -> list[us.UserRecord]:
        return list((await self.request(us.GetUsers())).users)

    async def update_user(
        self, user: IdentifierLike, *, username: str | None = None, active: bool | None = None
    ) -> None:
        status = None if active is None else (1 if active else 2)
        await self.request(
            us.UpdateUser(user=Identifier.of(user), username=username, status=status)
        )

    async def update_permissions(
        self, user: IdentifierLike, permissions: us.Permissions | None
    ) -> None:
        await self.request(us.UpdatePermissions(user=Identifier.of(user), permissions=permissions))

    async def change_password(self, user: IdentifierLike, current: str, new: str) -> None:
        await self.request(
            us.ChangePassword(user=Identifier.of(user), current_password=current, new_password=new)
        )

    async def create_token(self, name: str, *, expiry: float | None = None) -> str:
        """Create a personal access token; ``expiry`` in seconds (``None``: never)."""
        micros = U64_MAX if expiry is None else round(expiry * 1_000_000)
        reply = await self.request(us.CreatePersonalAccessToken(name=name, expiry=micros))
        return reply.token

    async def delete_token(self, name: str) -> None:
        await self.request(us.DeletePersonalAccessToken(name))

    async def tokens(self) -> list[us.TokenInfo]:
        return list((await self.request(us.GetPersonalAccessTokens())).tokens)
