"""The principal of a TLS client: ``User:`` + its certificate's subject after
``ssl.principal.mapping.rules``, exactly as Kafka's DefaultKafkaPrincipalBuilder makes it.

The subject is rendered as Java's ``X500Principal.getName()`` does (RFC 2253, most specific RDN
first: ``CN=client,OU=eng,O=kraftlog``), because ACLs and ``super.users`` written for Kafka name
principals in that exact form. The certificate is read with a small DER reader (stdlib only), so
what is rendered is what the certificate encodes, not a library's normalisation of it:

* CN, C, L, ST, O, OU, STREET, DC and UID are written by keyword; any other attribute as its
  dotted OID with ``#`` and the hex of its DER value (``1.2.840.113549.1.9.1=#1611...``).
* A string value is escaped as Java escapes it: a backslash before each of ``,=+<>#;"\\``, ``\\00``
  for NUL, and a backslash before leading and trailing spaces.
* The RDNs of a multi-valued RDN are joined by ``+`` in their encoded order.

``ssl.principal.mapping.rules`` follow Kafka's SslPrincipalMapper grammar: a comma-separated list
of ``DEFAULT`` and ``RULE:pattern/replacement/`` (optionally followed by ``L`` or ``U`` to lower or
upper the result); slashes inside pattern or replacement are escaped with a backslash. The first
rule whose pattern matches the whole name wins; the replacement is applied to every match of the
pattern, with Java's ``$n`` / ``${name}`` group references (a ``$n`` naming a group the pattern does
not have stays literal text, as in Kafka). No rule matching is an error, as in Kafka. Patterns are
Java regular expressions run by Python's ``re`` in ASCII mode (``\\w``, ``\\d``, ``\\s`` and case folding
ASCII-only, as Java's defaults), with Java's ``(?<name>...)`` groups and ``^(?i)`` accepted; Java-only
syntax Python lacks (``\\p{...}``, inline flags in mid-pattern) is refused when the rules are read.
"""

from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from typing import Final

from kraftlog.common._config_def import ConfigError
from kraftlog.common.errors import KafkaError

__all__ = [
    "ANONYMOUS_PRINCIPAL",
    "NoMatchingRuleError",
    "SslPrincipalMapper",
    "TlsConfigError",
    "certificate_subject",
    "peer_principal",
    "principal_from_certificate",
]

#: the principal of a TLS connection without a client certificate (Kafka's KafkaPrincipal.ANONYMOUS)
ANONYMOUS_PRINCIPAL: Final = "User:ANONYMOUS"
_RULES_KEY: Final = "ssl.principal.mapping.rules"

_RFC2253_KEYWORDS: Final = {
    "2.5.4.3": "CN",
    "2.5.4.6": "C",
    "2.5.4.7": "L",
    "2.5.4.8": "ST",
    "2.5.4.10": "O",
    "2.5.4.11": "OU",
    "2.5.4.9": "STREET",
    "0.9.2342.19200300.100.1.25": "DC",
    "0.9.2342.19200300.100.1.1": "UID",
}
#: DER string types Java renders as text (UTF8, Printable, T61, IA5, General, BMP String)
_STRING_TAGS: Final = frozenset({0x0C, 0x13, 0x14, 0x16, 0x1B, 0x1E})
_ESCAPED: Final = ',=+<>#;"\\'


class TlsConfigError(ConfigError):
    """An ``ssl.*`` setting is missing, contradicts another, or its key material does not load.

    INVALID_CONFIG like every config error (a ValueError); ``key`` names the (first) culprit key.
    """


class NoMatchingRuleError(KafkaError):
    """No ssl.principal.mapping.rules rule applies to the client certificate's subject.

    Kafka fails the connection with a KafkaException (UNKNOWN_SERVER_ERROR) in this case.
    """


# --- DER


def _element(data: bytes, pos: int, end: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the DER element at ``pos``; ValueError if malformed."""
    if pos + 2 > end:
        raise ValueError("truncated DER element")
    tag, length = data[pos], data[pos + 1]
    if tag & 0x1F == 0x1F:
        raise ValueError("multi-byte DER tags are not expected in a certificate name")
    pos += 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or pos + count > end:
            raise ValueError("invalid DER length")
        length = int.from_bytes(data[pos : pos + count], "big")
        pos += count
    if pos + length > end:
        raise ValueError("DER element runs past its container")
    return tag, pos, pos + length


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int, int]]:
    """(tag, element start, content start, content end) of each element in ``data[start:end]``."""
    found = []
    pos = start
    while pos < end:
        tag, content, after = _element(data, pos, end)
        found.append((tag, pos, content, after))
        pos = after
    return found


def _oid(content: bytes) -> str:
    if not content or content[-1] & 0x80:
        raise ValueError("invalid OBJECT IDENTIFIER")
    arcs: list[int] = []
    value = 0
    for byte in content:
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            arcs.append(value)
            value = 0
    first = arcs[0]
    head = [min(first // 40, 2), first - 40 * min(first // 40, 2)]
    return ".".join(str(arc) for arc in head + arcs[1:])


def _subject_bounds(der: bytes) -> tuple[int, int]:
    """Content bounds of the subject Name inside a certificate's TBSCertificate."""
    tag, start, end = _element(der, 0, len(der))
    if tag != 0x30:
        raise ValueError("not a DER certificate")
    tag, start, end = _element(der, start, end)
    if tag != 0x30:
        raise ValueError("not a DER certificate")
    fields = _children(der, start, end)
    if fields and fields[0][0] == 0xA0:  # [0] EXPLICIT version
        fields = fields[1:]
    # serialNumber, signature, issuer, validity, subject
    if len(fields) < 5 or fields[4][0] != 0x30:
        raise ValueError("certificate without a subject")
    return fields[4][2], fields[4][3]


def _escape_value(text: str) -> str:
    escaped = "".join("\\00" if c == "\x00" else ("\\" + c if c in _ESCAPED else c) for c in text)
    lead = len(escaped) - len(escaped.lstrip(" \r"))
    trail = len(escaped) - len(escaped.rstrip(" \r"))
    return "".join("\\" + c if i < lead or i >= len(escaped) - trail else c for i, c in enumerate(escaped))


def _attribute(der: bytes, start: int, end: int) -> str:
    parts = _children(der, start, end)
    if len(parts) != 2 or parts[0][0] != 0x06:
        raise ValueError("invalid AttributeTypeAndValue")
    oid = _oid(der[parts[0][2] : parts[0][3]])
    tag, element, content, after = parts[1]
    keyword = _RFC2253_KEYWORDS.get(oid)
    if keyword is None or tag not in _STRING_TAGS:
        return f"{keyword or oid}=#{der[element:after].hex()}"
    # as current JDKs: BMPString is UTF-16; the others' bytes are read as UTF-8, bad bytes replaced
    # (JDK 17 still read BMPString's bytes as UTF-8 too: CN=\00b\00m\00p for "bmp")
    encoding = "utf-16-be" if tag == 0x1E else "utf-8"
    return f"{keyword}={_escape_value(der[content:after].decode(encoding, errors='replace'))}"


def _to_der(certificate: bytes) -> bytes:
    if certificate[:1] == b"\x30":  # a DER SEQUENCE; PEM is text and never starts so
        return bytes(certificate)
    match = re.search(rb"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", certificate, re.S)
    if match is None:
        raise ValueError("neither a DER certificate nor a PEM CERTIFICATE block")
    return ssl.PEM_cert_to_DER_cert(match.group(0).decode("ascii"))


def certificate_subject(certificate: bytes) -> str:
    """The subject DN of a DER or PEM certificate as Java's ``X500Principal.getName()`` renders it.

    Raises ValueError for bytes that are not a certificate.
    """
    der = _to_der(certificate)
    start, end = _subject_bounds(der)
    rdns = []
    for tag, _, content, after in _children(der, start, end):
        if tag != 0x31:
            raise ValueError("invalid RelativeDistinguishedName")
        attributes = [_attribute(der, c, a) for t, _, c, a in _children(der, content, after) if t == 0x30]
        if not attributes:
            raise ValueError("empty RelativeDistinguishedName")
        rdns.append("+".join(attributes))
    return ",".join(reversed(rdns))


# --- ssl.principal.mapping.rules

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)", re.ASCII)
_PARSER = re.compile(_RULE, re.ASCII)
_JAVA_NAMED_GROUP = re.compile(r"\(\?<([A-Za-z][A-Za-z0-9]*)>")
_FLAGS_AFTER_CARET = re.compile(r"^\^(\(\?[imsx]+\))")
_JAVA_TRIM: Final = "".join(chr(code) for code in range(0x21))


def _rules_error(message: str) -> TlsConfigError:
    return TlsConfigError(f"{_RULES_KEY}: {message}", key=_RULES_KEY)


def _replacement(text: str, pattern: re.Pattern[str]) -> tuple[str | int, ...]:
    """Java's replacement syntax as literal strings and group references (int index or name)."""
    groups = pattern.groups
    tokens: list[str | int] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char == "\\":
            if i + 1 == len(text):
                raise _rules_error(f"replacement {text!r} ends with a lone backslash")
            tokens.append(text[i + 1])
            i += 2
        elif char != "$":
            tokens.append(char)
            i += 1
        elif text.startswith("${", i):
            close = text.find("}", i)
            name = text[i + 2 : close] if close > 0 else ""
            if name not in pattern.groupindex:
                raise _rules_error(f"replacement {text!r} names no group of its pattern")
            tokens.append(pattern.groupindex[name])
            i = close + 1
        elif i + 1 < len(text) and text[i + 1] in "0123456789":
            ref = int(text[i + 1])
            if ref > groups:
                if groups == 0:
                    raise _rules_error(f"replacement {text!r} refers to group {ref}, but its pattern has none")
                tokens.append("$")  # Kafka leaves a reference past the last group literal
                i += 1
                continue
            i += 2
            while i < len(text) and text[i] in "0123456789" and ref * 10 + int(text[i]) <= groups:
                ref = ref * 10 + int(text[i])
                i += 1
            tokens.append(ref)
        else:
            raise _rules_error(f"replacement {text!r} has a '$' that is no group reference")
    return tuple(tokens)


@dataclass(frozen=True)
class _Rule:
    source: str
    pattern: re.Pattern[str] | None = None
    replacement: tuple[str | int, ...] = ()
    case: str = ""

    def apply(self, name: str) -> str | None:
        pattern = self.pattern
        if pattern is None:
            return name
        if pattern.fullmatch(name) is None:
            return None

        def expand(match: re.Match[str]) -> str:
            return "".join(t if isinstance(t, str) else (match.group(t) or "") for t in self.replacement)

        result = pattern.sub(expand, name)
        if self.case == "L":
            return result.lower()
        return result.upper() if self.case == "U" else result


class SslPrincipalMapper:
    """Parsed ``ssl.principal.mapping.rules``; `name` maps a subject DN to the principal name."""

    def __init__(self, rules: tuple[_Rule, ...]) -> None:
        self._rules = rules

    @classmethod
    def from_rules(cls, rules: str | None) -> SslPrincipalMapper:
        """Parse the config value (None is Kafka's default, ``DEFAULT``); a malformed rule or
        pattern raises `TlsConfigError` naming ``ssl.principal.mapping.rules``."""
        text = "DEFAULT" if rules is None else rules.strip(_JAVA_TRIM)
        parsed = []
        for found in _SPLITTER.finditer(text):
            rule = found.group(1)
            match = _PARSER.match(rule)
            if match is None or match.end() != len(rule):
                raise _rules_error(f"invalid rule {rule!r}")
            if match.group(1) is not None:
                parsed.append(_Rule("DEFAULT"))
            elif match.group(2) is not None:
                source, replacement, case = match.group(2), match.group(4), match.group(6)
                try:
                    python_source = _FLAGS_AFTER_CARET.sub(r"\1^", _JAVA_NAMED_GROUP.sub(r"(?P<\1>", source))
                    pattern = re.compile(python_source, re.ASCII)
                except re.error as err:
                    raise _rules_error(f"invalid pattern {source!r}: {err}") from err
                shown = f"RULE:{source}/{replacement}" + (f"/{case}" if case else "")
                parsed.append(_Rule(shown, pattern, _replacement(replacement, pattern), case))
            # an empty rule (",,") is ignored, as in Kafka
        return cls(tuple(parsed))

    @property
    def rules(self) -> tuple[str, ...]:
        """The parsed rules as Kafka prints them (``DEFAULT``, ``RULE:pattern/replacement/L``)."""
        return tuple(rule.source for rule in self._rules)

    def name(self, distinguished_name: str) -> str:
        """The short name of the first rule that applies; `NoMatchingRuleError` when none does."""
        for rule in self._rules:
            result = rule.apply(distinguished_name)
            if result is not None:
                return result
        raise NoMatchingRuleError(f"No rules apply to {distinguished_name}, rules {list(self.rules)}")

    def __repr__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(self.rules)}])"


def principal_from_certificate(certificate: bytes | None, rules: SslPrincipalMapper | str | None = None) -> str:
    """``User:<mapped subject>`` of a client certificate (DER or PEM); ``User:ANONYMOUS`` for None
    or empty bytes (no certificate: ``ssl.client.auth`` none, or requested and not sent)."""
    if not certificate:
        return ANONYMOUS_PRINCIPAL
    mapper = rules if isinstance(rules, SslPrincipalMapper) else SslPrincipalMapper.from_rules(rules)
    return "User:" + mapper.name(certificate_subject(certificate))


def peer_principal(connection: ssl.SSLSocket | ssl.SSLObject, rules: SslPrincipalMapper | str | None = None) -> str:
    """The principal of the peer of a completed TLS handshake (server side)."""
    return principal_from_certificate(connection.getpeercert(binary_form=True), rules)
