"""``kraftlog storage format --add-scram``: SCRAM credentials in a new cluster's bootstrap metadata
(KIP-900, Kafka's ``kafka-storage.sh format --add-scram``).

Each argument is ``MECHANISM=[name=alice,password=alice-secret]``, or with a given salt and count
``SCRAM-SHA-512=[name=alice,salt="c2FsdA==",iterations=8192,password=secret]``, or, to keep the
password off the command line, ``[name=alice,salt=...,saltedpassword=...]`` (both base64). The
syntax, defaults (iterations 4096, a random salt) and refusals are Kafka's ScramParser's; each
refusal names the part that is wrong. The password is salted and iterated here: the bootstrap file
keeps the derived keys (`UserScramCredentialRecord`), never the password.
"""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Callable, Sequence

from kraftlog.cli._common import UserError
from kraftlog.common.security import (
    SCRAM_DEFAULT_ITERATIONS,
    ScramMechanism,
    scram_credential_from_salted_password,
    scram_salted_password,
)
from kraftlog.metadata_log import UserScramCredentialRecord
from kraftlog.metadata_log.image import credential_to_record

__all__ = ["parse_add_scram"]

_SALT_BYTES = 32
_KNOWN = ("name", "salt", "iterations", "password", "saltedpassword")


def parse_add_scram(
    arguments: Sequence[str], *, rng: Callable[[int], bytes] = secrets.token_bytes
) -> list[UserScramCredentialRecord]:
    """The credential records of every ``--add-scram`` argument, in order; `UserError` on the
    first bad one (``rng`` draws the salts not given)."""
    return [_record(argument, rng) for argument in arguments]


def _mechanism_and_settings(argument: str) -> tuple[ScramMechanism, str]:
    text = argument.strip()
    mechanism_name, equals, config = text.partition("=")
    if not equals:
        raise UserError(f"--add-scram: failed to find equals sign in SCRAM argument '{text}'")
    try:
        mechanism = ScramMechanism.from_name(mechanism_name)
    except ValueError:
        raise UserError(
            f"--add-scram: the mechanism {mechanism_name!r} is not supported (SCRAM-SHA-256, SCRAM-SHA-512)"
        ) from None
    if not config.startswith("["):
        raise UserError(f"--add-scram {mechanism_name}: expected the configuration to start with [")
    if not config.endswith("]"):
        raise UserError(f"--add-scram {mechanism_name}: expected the configuration to end with ]")
    return mechanism, config[1:-1]


def _components(prefix: str, config: str) -> dict[str, str]:
    components: dict[str, str] = {}
    for component in config.split(","):
        key, equals, value = component.partition("=")
        if not equals:
            raise UserError(f"{prefix}: no equals sign found in SCRAM component '{component}'")
        if len(value) >= 2 and value.startswith('"') and value.endswith('"'):
            value = value[1:-1]
        components[key] = value
    return components


def _base64(prefix: str, what: str, text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise UserError(f"{prefix}: failed to decode the given {what} as base64: {text!r}") from None


def _record(argument: str, rng: Callable[[int], bytes]) -> UserScramCredentialRecord:
    mechanism, config = _mechanism_and_settings(argument)
    prefix = f"--add-scram {mechanism.mechanism_name}"
    components = _components(prefix, config)
    name = components.pop("name", None)
    if not name:
        raise UserError(f"{prefix}: you must supply 'name'")
    salt_text = components.pop("salt", None)
    salt = _base64(prefix, "salt", salt_text) if salt_text is not None else None
    iterations_text = components.pop("iterations", None)
    iterations = SCRAM_DEFAULT_ITERATIONS
    if iterations_text is not None:
        try:
            iterations = int(iterations_text)
        except ValueError:
            raise UserError(f"{prefix}: failed to parse the iterations count {iterations_text!r}") from None
    password = components.pop("password", None)
    salted_text = components.pop("saltedpassword", None)
    if components:
        raise UserError(
            f"{prefix}: unknown SCRAM configurations: {', '.join(sorted(components))} ({', '.join(_KNOWN)})"
        )
    if password is None and salted_text is None:
        raise UserError(f"{prefix}: you must supply one of 'password' or 'saltedpassword'")
    if password is None and salt is None:
        raise UserError(f"{prefix}: you must supply 'salt' with 'saltedpassword'")
    if iterations < mechanism.min_iterations:
        raise UserError(f"{prefix}: the 'iterations' value must be >= {mechanism.min_iterations}")
    if iterations > mechanism.max_iterations:
        raise UserError(f"{prefix}: the 'iterations' value must be <= {mechanism.max_iterations}")
    if salt is None:
        salt = rng(_SALT_BYTES)
    if not salt:
        raise UserError(f"{prefix}: the salt must not be empty")
    if password is not None:
        salted = scram_salted_password(mechanism, password, salt, iterations)
    else:
        assert salted_text is not None
        salted = _base64(prefix, "saltedpassword", salted_text)
    credential = scram_credential_from_salted_password(mechanism, salted, salt, iterations)
    return credential_to_record(credential, name, mechanism)
