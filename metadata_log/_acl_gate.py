"""`AclGate`: a node's answer to "may this session do that?", over its latest metadata image.

Both listeners of a broker (gRPC and Kafka's protocol) and a controller's gRPC listener give their
request contexts the same gate, so every request of a node is authorized by one piece of code from
one image, with no call to anyone (ACLs are records of the metadata log, docs/architecture.md §5).

Configured as Kafka's: ``authorizer.class.name`` empty means no authorization (everything is
allowed, as a Kafka cluster without an authorizer); Kafka's StandardAuthorizer class name turns on
the ACLs, ``super.users`` (``User:admin;User:CN=broker1``) and ``allow.everyone.if.no.acl.found``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from kraftlog.common.security import AclOperation, ResourceType, Session, parse_super_users
from kraftlog.metadata_log._authorizer import Authorizer
from kraftlog.metadata_log.image import MetadataImage

__all__ = ["AclGate"]


class AclGate:
    """The node's `AuthorizeFn`: call it with (session, operation, resource type, name or None).

    The `Authorizer` (an index of the image's ACLs) is rebuilt only when the image's ACLs changed,
    so a request pays a dictionary lookup or two."""

    def __init__(self, image: Callable[[], MetadataImage], config: Mapping[str, object]) -> None:
        self._image = image
        self.enabled = bool(config["authorizer.class.name"])
        super_users = config["super.users"]
        self._authorizer = Authorizer(
            MetadataImage.EMPTY.acls,
            parse_super_users(super_users) if isinstance(super_users, str) else frozenset(),
            bool(config["allow.everyone.if.no.acl.found"]),
        )

    @property
    def authorizer(self) -> Authorizer:
        """The authorizer of the current image."""
        authorizer = self._authorizer.updated(self._image())
        self._authorizer = authorizer
        return authorizer

    def __call__(
        self, session: Session, operation: AclOperation, resource_type: ResourceType, name: str | None
    ) -> bool:
        if not self.enabled:
            return True
        authorizer = self.authorizer
        if name is None:
            return authorizer.authorize_by_resource_type(
                session.principal, session.client_host, operation, resource_type
            )
        return authorizer.authorize(session.principal, session.client_host, operation, resource_type, name)
