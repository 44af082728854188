"""The security of a local cluster (`LocalCluster(security=...)`, ``kraftlog local start --security``):
a throw-away CA and certificates, the nodes' security keys, client arguments and the
``client.properties`` of ``--command-config``.

Modes: plaintext; tls (every listener TLS, no client certificates); mtls (client certificates
required, Kafka's StandardAuthorizer on, the nodes and ``User:CN=admin`` super users); scram (every
listener SASL_SSL: the nodes log in with PLAIN as ``User:node``, clients with SCRAM or PLAIN as
``User:admin``, whose SCRAM credential is created once the cluster is up).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kraftlog.common import write_private_file
from kraftlog.common.security import SCRAM_DEFAULT_ITERATIONS, STANDARD_AUTHORIZER

if TYPE_CHECKING:
    from kraftlog.deploy._node_spec import NodeSpec

__all__ = ["SECURITY_MODES", "_ClusterSecurity"]

SECURITY_MODES = ("plaintext", "tls", "mtls", "scram")
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"


class _ClusterSecurity:
    """The security half of `LocalCluster` (which provides the names below)."""

    base_dir: Path
    security: str
    cluster_id: str | None
    nodes: dict[int, NodeSpec]
    admin: Callable[..., Any]  # LocalCluster.admin

    @property
    def tls_dir(self) -> Path:
        """The throw-away CA and the certificates of a tls/mtls cluster."""
        return self.base_dir / "tls"

    @property
    def command_config(self) -> Path:
        """The client properties of a secured cluster (``--command-config``, the admin's identity)."""
        return self.base_dir / "client.properties"

    @property
    def kafka_listener_name(self) -> str:
        """The name (and protocol) of the brokers' Kafka listener: PLAINTEXT, or SSL when secured."""
        return {"plaintext": "PLAINTEXT", "scram": "SASL_SSL"}.get(self.security, "SSL")

    def _make_certificates(self) -> None:
        from kraftlog.deploy._certs import make_ca, make_certificate

        ca = make_ca(self.tls_dir, f"kraftlog local cluster {self.cluster_id}")
        for spec in self.nodes.values():
            make_certificate(ca, self.tls_dir, f"node-{spec.node_id}", [spec.host, "localhost", "127.0.0.1"])
        make_certificate(ca, self.tls_dir, "admin", client=True)
        protocol = "SASL_SSL" if self.security == "scram" else "SSL"
        lines = [
            f"security.protocol={protocol}",
            "ssl.truststore.type=PEM",
            f"ssl.truststore.location={self.tls_dir / 'ca.crt'}",
        ]
        if self.security == "mtls":
            lines += ["ssl.keystore.type=PEM", f"ssl.keystore.location={self.tls_dir / 'admin.keystore.pem'}"]
        if self.security == "scram":
            for path in (self.scram_password_file, self._nodes_password_file):
                write_private_file(path, secrets.token_urlsafe(18), fsync=False)
            password = self.scram_password_file.read_text().strip()
            lines += [
                "sasl.mechanism=SCRAM-SHA-512",
                f'sasl.jaas.config={_SCRAM_MODULE} required username="admin" password="{password}";',
            ]
        # it points at the admin's key (and under scram holds the admin's password): 0600
        write_private_file(self.command_config, "".join(line + "\n" for line in lines), fsync=False)

    def _security_settings(self, spec: NodeSpec) -> dict[str, Any]:
        from kraftlog.deploy._certs import load_issued

        settings: dict[str, Any] = {
            "listener.security.protocol.map": "BROKER:SSL,SSL:SSL,CONTROLLER:SSL",
            **load_issued(self.tls_dir, f"node-{spec.node_id}").ssl_config(),
        }
        if self.security == "mtls":
            nodes = ";".join(f"User:CN=node-{nid}" for nid in sorted(self.nodes))
            settings.update(
                {
                    "ssl.client.auth": "required",
                    "authorizer.class.name": STANDARD_AUTHORIZER,
                    "super.users": f"{nodes};User:CN=admin",
                }
            )
        if self.security == "scram":
            # every listener SASL_SSL: clients log in with SCRAM (or PLAIN), the nodes with PLAIN
            # as User:node (its password lives in the configs, as Kafka's inter-broker JAAS does)
            node_password = self._nodes_password_file.read_text().strip()
            admin_password = self.scram_password_file.read_text().strip()
            jaas = (
                f'{_PLAIN_MODULE} required username="node" password="{node_password}" '
                f'user_node="{node_password}" user_admin="{admin_password}";'
            )
            settings.update(
                {
                    "listener.security.protocol.map": "BROKER:SASL_SSL,SASL_SSL:SASL_SSL,CONTROLLER:SASL_SSL",
                    "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512,PLAIN",
                    "sasl.mechanism.inter.broker.protocol": "PLAIN",
                    "sasl.mechanism.controller.protocol": "PLAIN",
                    "authorizer.class.name": STANDARD_AUTHORIZER,
                    "super.users": "User:node;User:admin",
                    **{
                        f"listener.name.{name}.plain.sasl.jaas.config": jaas
                        for name in ("broker", "controller", "sasl_ssl")
                    },
                }
            )
        return settings

    @property
    def _nodes_password_file(self) -> Path:
        return self.base_dir / "scram-nodes.password"

    @property
    def scram_password_file(self) -> Path:
        return self.base_dir / "scram-admin.password"

    def ensure_scram_admin(self) -> None:
        """A scram cluster's ``admin`` SCRAM user (both mechanisms), created once it is up (until
        then the admin logs in with PLAIN, which the listeners' JAAS entries know)."""
        if self.security != "scram":
            return
        password = self.scram_password_file.read_text().strip()
        with self.admin(request_timeout_ms=30_000) as admin:
            iterations = SCRAM_DEFAULT_ITERATIONS  # as an unknown name's answer says (docs/security.md)
            answer = admin.alter_user_scram_credentials(
                [("admin", 1, password, iterations), ("admin", 2, password, iterations)]
            )
        failed = [r.error.name for r in answer.results if r.error.code] + (
            [answer.error.name] if answer.error.code else []
        )
        if failed:
            raise RuntimeError(f"creating the admin SCRAM user failed: {failed}")

    def kafka_client_security(self, user: str = "admin", password: str | None = None) -> dict[str, Any]:
        """kafka-python's arguments for a Kafka-protocol client of this cluster (SCRAM-SHA-512 as
        ``user`` on a scram cluster, the certificates of `client_security` otherwise)."""
        if self.security != "scram":
            return self.client_security()
        return {
            "security_protocol": "SASL_SSL",
            "ssl_cafile": str(self.tls_dir / "ca.crt"),
            "sasl_mechanism": "SCRAM-SHA-512",
            "sasl_plain_username": user,
            "sasl_plain_password": password if password is not None else self.scram_password_file.read_text().strip(),
        }

    def client_security(self, name: str = "admin") -> dict[str, Any]:
        """kafka-python's arguments for a client of this cluster (``name``'s certificate under
        mtls: ``admin`` is a super user), for `Admin`, `Producer`, `Consumer` and Kafka clients."""
        if self.security == "plaintext":
            return {}
        ca = str(self.tls_dir / "ca.crt")
        if self.security == "tls":
            return {"security_protocol": "SSL", "ssl_cafile": ca}
        if self.security == "scram":  # PLAIN: the admin of the listeners' JAAS, there before any SCRAM user
            password = self.scram_password_file.read_text().strip()
            return {
                "security_protocol": "SASL_SSL",
                "ssl_cafile": ca,
                "sasl_mechanism": "PLAIN",
                "sasl_plain_username": name,
                "sasl_plain_password": password,
            }
        from kraftlog.deploy._certs import load_issued

        issued = load_issued(self.tls_dir, name)
        return {
            "security_protocol": "SSL",
            "ssl_cafile": ca,
            "ssl_certfile": str(issued.certificate_path),
            "ssl_keyfile": str(issued.key_path),
        }

    def client_security_shown(self) -> dict[str, Any]:
        """`client_security` as printed (``kraftlog local start|status --output json``): a password
        is never shown, ``sasl_password_file`` names the file that holds it."""
        shown = dict(self.client_security())
        if shown.pop("sasl_plain_password", None) is not None:
            shown["sasl_password_file"] = str(self.scram_password_file)
        return shown

    def client_certificate(self, name: str) -> dict[str, Any]:
        """A new client certificate ``CN=<name>`` (principal ``User:CN=<name>``), as `client_security`."""
        from kraftlog.deploy._certs import load_ca, make_certificate

        make_certificate(load_ca(self.tls_dir), self.tls_dir, name, client=True)
        return self.client_security(name)
