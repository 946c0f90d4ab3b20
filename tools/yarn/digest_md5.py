"""The client side of SASL DIGEST-MD5 (RFC 2831) with QOP ``auth``, as Hadoop's token
authentication uses it.

Hadoop's RPC servers (the RM's scheduler port, every NodeManager) demand SASL method
``TOKEN`` with mechanism ``DIGEST-MD5`` even when security is off. The user name is the
token's identifier in base64, the password its password in base64, the realm
``default`` and the digest-uri ``<protocol>/<serverId>`` from the server's NEGOTIATE
(``/default``). Only QOP ``auth`` is spoken (Hadoop's default
``hadoop.rpc.protection=authentication``): nothing is wrapped after the handshake, so
``auth-int``/``auth-conf`` servers are refused with a message that says so.
"""
from __future__ import annotations

import base64
import hashlib
import os
import re

#: key=value or key="quoted value" (a quoted value may hold \" escapes and commas)
_DIRECTIVE = re.compile(r'\s*([A-Za-z0-9-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))\s*(?:,|$)')


class DigestMD5Error(ValueError):
    """A challenge this client cannot answer, or a server whose proof of the password is wrong."""


def parse_directives(challenge: bytes) -> dict[str, str]:
    """A DIGEST-MD5 challenge (``realm="x",nonce="y",qop="auth",...``) as a dict."""
    text = challenge.decode("utf-8")
    out: dict[str, str] = {}
    pos = 0
    while pos < len(text):
        m = _DIRECTIVE.match(text, pos)
        if not m or m.end() == pos:
            raise DigestMD5Error(f"unreadable DIGEST-MD5 challenge at character {pos}: {text[pos:pos + 40]!r}")
        value = m.group(2) if m.group(2) is not None else m.group(3)
        out[m.group(1).lower()] = re.sub(r"\\(.)", r"\1", value)
        pos = m.end()
    return out


def _h(data: bytes) -> bytes:
    return hashlib.md5(data).digest()


def _hex(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def _digest(username: str, realm: str, password: str, nonce: str, cnonce: str, nc: str,
            qop: str, a2_prefix: str, digest_uri: str) -> str:
    """RFC 2831 §2.1.2.1's response-value (``a2_prefix`` "AUTHENTICATE" for the client's
    response, "" for the server's rspauth)."""
    a1 = _h(f"{username}:{realm}:{password}".encode("utf-8")) + f":{nonce}:{cnonce}".encode("utf-8")
    a2 = f"{a2_prefix}:{digest_uri}".encode("utf-8")
    return _hex(f"{_hex(a1)}:{nonce}:{nc}:{cnonce}:{qop}:{_hex(a2)}".encode("utf-8"))


class DigestMD5Client:
    """One DIGEST-MD5 authentication: :meth:`respond` to the server's challenge, then
    :meth:`verify` the server's ``rspauth``."""

    def __init__(self, username: str, password: str, digest_uri: str, cnonce: str | None = None):
        self.username, self.password, self.digest_uri = username, password, digest_uri
        self.cnonce = cnonce or base64.b64encode(os.urandom(24)).decode("ascii")
        self.nc = "00000001"
        self._expected_rspauth: str | None = None

    @classmethod
    def for_token(cls, identifier: bytes, password: bytes, protocol: str, server_id: str) -> "DigestMD5Client":
        """A client for Hadoop token authentication (SaslRpcServer's encodeIdentifier/encodePassword)."""
        return cls(base64.b64encode(identifier).decode("ascii"), base64.b64encode(password).decode("ascii"),
                   f"{protocol}/{server_id}")

    def respond(self, challenge: bytes) -> bytes:
        """The digest-response to ``challenge``."""
        d = parse_directives(challenge)
        if "nonce" not in d:
            raise DigestMD5Error("the DIGEST-MD5 challenge has no nonce")
        qops = [q.strip() for q in d.get("qop", "auth").split(",")]
        if "auth" not in qops:
            raise DigestMD5Error(f"the server offers QOP {','.join(qops)}; only 'auth' is spoken "
                                 f"(hadoop.rpc.protection=authentication)")
        algorithm = d.get("algorithm", "md5-sess")
        if algorithm != "md5-sess":
            raise DigestMD5Error(f"expected algorithm md5-sess, got {algorithm}")
        realm, nonce = d.get("realm", ""), d["nonce"]
        response = _digest(self.username, realm, self.password, nonce, self.cnonce, self.nc, "auth",
                           "AUTHENTICATE", self.digest_uri)
        self._expected_rspauth = _digest(self.username, realm, self.password, nonce, self.cnonce, self.nc,
                                         "auth", "", self.digest_uri)
        fields = [f'username="{_quote(self.username)}"', f'realm="{_quote(realm)}"', f'nonce="{_quote(nonce)}"',
                  f'cnonce="{_quote(self.cnonce)}"', f"nc={self.nc}", "qop=auth",
                  f'digest-uri="{_quote(self.digest_uri)}"', f"response={response}"]
        if d.get("charset", "").lower() == "utf-8":
            fields.append("charset=utf-8")
        return ",".join(fields).encode("utf-8")

    def verify(self, final: bytes) -> None:
        """Check the server's ``rspauth=...`` (it proves the server knows the password too)."""
        got = parse_directives(final).get("rspauth")
        if self._expected_rspauth is None or got != self._expected_rspauth:
            raise DigestMD5Error(f"the server's rspauth {got!r} does not match (expected {self._expected_rspauth!r})")


def _quote(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')
