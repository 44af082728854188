"""Security, one implementation for both protocols: TLS settings and certificate principals, SASL
(SCRAM, PLAIN) exchanges and sessions, Kafka's ACL model, and the request context every handler
asks for its authorization decision.

Below the config schema (`kraftlog.common.config` reads its key definitions from here) and above
the errors; it needs only the standard library at import (certificates load `cryptography` when
first used).
"""

from kraftlog.common.security._acl import (
    CLUSTER_RESOURCE_NAME,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    ScramMechanism,
    acl_binding_problem,
    parse_super_users,
    supported_operations,
    validate_acl_binding,
)
from kraftlog.common.security._config_schema_security import (
    LISTENER_PREFIXABLE,
    SASL_MECHANISMS_SUPPORTED,
    STANDARD_AUTHORIZER,
    define_security_keys,
    listener_prefixed_key,
    parse_jaas_config,
)
from kraftlog.common.security._listener_security import (
    BROKER_LISTENER,
    ListenerSecurity,
    SaslLogin,
    grpc_listener_name,
    listener_protocol,
)
from kraftlog.common.security._request_context import (
    ANONYMOUS,
    FORWARDED_HOST,
    FORWARDED_PRINCIPAL,
    AuthorizeFn,
    RequestContext,
    Session,
    current_request,
    denied_error,
    forwarding_metadata,
    request_scope,
    spawn,
)
from kraftlog.common.security._sasl_sessions import (
    SESSION_METADATA,
    SaslSessions,
    ScramLookup,
    sasl_server,
    sasl_session,
    sasl_step,
)
from kraftlog.common.security._scram import (
    ScramClient,
    ScramCredential,
    scram_credential_from_salted_password,
    scram_salted_password,
)
from kraftlog.common.security._tls import (
    TlsSettings,
    grpc_channel_credentials,
    grpc_server_credentials,
    grpc_unsupported_keys,
    peer_principal,
    principal_from_certificate,
    server_context,
)

__all__: list[str] = [
    "ANONYMOUS",
    "AclBinding",
    "AclBindingFilter",
    "AclOperation",
    "AclPermissionType",
    "AuthorizeFn",
    "BROKER_LISTENER",
    "CLUSTER_RESOURCE_NAME",
    "FORWARDED_HOST",
    "FORWARDED_PRINCIPAL",
    "LISTENER_PREFIXABLE",
    "ListenerSecurity",
    "PatternType",
    "RequestContext",
    "ResourceType",
    "SASL_MECHANISMS_SUPPORTED",
    "SESSION_METADATA",
    "STANDARD_AUTHORIZER",
    "SaslLogin",
    "SaslSessions",
    "ScramClient",
    "ScramCredential",
    "ScramLookup",
    "ScramMechanism",
    "Session",
    "TlsSettings",
    "WILDCARD_HOST",
    "WILDCARD_PRINCIPAL",
    "WILDCARD_RESOURCE",
    "acl_binding_problem",
    "current_request",
    "define_security_keys",
    "denied_error",
    "forwarding_metadata",
    "grpc_channel_credentials",
    "grpc_listener_name",
    "grpc_server_credentials",
    "grpc_unsupported_keys",
    "listener_prefixed_key",
    "listener_protocol",
    "parse_jaas_config",
    "parse_super_users",
    "peer_principal",
    "principal_from_certificate",
    "request_scope",
    "sasl_server",
    "sasl_session",
    "sasl_step",
    "scram_credential_from_salted_password",
    "scram_salted_password",
    "server_context",
    "spawn",
    "supported_operations",
    "validate_acl_binding",
]
