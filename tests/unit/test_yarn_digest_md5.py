"""SASL DIGEST-MD5 (QOP auth) as Hadoop's token authentication uses it, against RFC 2831's example."""
from __future__ import annotations

import pytest

from gangmaster.tools.yarn.digest_md5 import DigestMD5Client, DigestMD5Error, parse_directives

# RFC 2831 section 4, the IMAP example (its challenge with algorithm and charset as Hadoop sends them)
RFC_CHALLENGE = (b'realm="elwood.innosoft.com",nonce="OA6MG9tEQGm2hh",qop="auth",algorithm=md5-sess,'
                 b'charset=utf-8')
RFC_RESPONSE = "d388dad90d4bbd760a152321f2143af7"
RFC_RSPAUTH = b"rspauth=ea40f60335c427b5527b84dbabcdfffd"


def rfc_client() -> DigestMD5Client:
    return DigestMD5Client("chris", "secret", "imap/elwood.innosoft.com", cnonce="OA6MHXh6VqTrRk")


def test_rfc_2831_response():
    answer = parse_directives(rfc_client().respond(RFC_CHALLENGE))
    assert answer["response"] == RFC_RESPONSE
    assert answer == {"username": "chris", "realm": "elwood.innosoft.com", "nonce": "OA6MG9tEQGm2hh",
                      "cnonce": "OA6MHXh6VqTrRk", "nc": "00000001", "qop": "auth",
                      "digest-uri": "imap/elwood.innosoft.com", "response": RFC_RESPONSE, "charset": "utf-8"}


def test_rfc_2831_rspauth_verifies_and_a_wrong_one_does_not():
    client = rfc_client()
    client.respond(RFC_CHALLENGE)
    client.verify(RFC_RSPAUTH)
    with pytest.raises(DigestMD5Error, match="does not match"):
        client.verify(b"rspauth=00000000000000000000000000000000")


def test_verify_before_respond_fails():
    with pytest.raises(DigestMD5Error):
        rfc_client().verify(RFC_RSPAUTH)


def test_hadoop_token_names():
    """user = base64(identifier), password = base64(password), digest-uri = protocol/serverId."""
    client = DigestMD5Client.for_token(b"\x00\x01id", b"pw\xff", "", "default")
    assert (client.username, client.password, client.digest_uri) == ("AAFpZA==", "cHf/", "/default")


@pytest.mark.parametrize("challenge,expected", [
    (b'realm="default",nonce="n",qop="auth-conf",algorithm=md5-sess', "only 'auth' is spoken"),
    (b'realm="default",qop="auth",algorithm=md5-sess', "no nonce"),
    (b'realm="default",nonce="n",qop="auth",algorithm=md5', "expected algorithm md5-sess"),
    (b'realm="default",nonce="n",="x"', "unreadable DIGEST-MD5 challenge"),
])
def test_challenges_refused_with_the_reason(challenge, expected):
    with pytest.raises(DigestMD5Error, match=expected):
        rfc_client().respond(challenge)


def test_qop_list_with_auth_is_accepted():
    answer = parse_directives(rfc_client().respond(b'nonce="n",qop="auth-conf,auth",algorithm=md5-sess'))
    assert answer["qop"] == "auth" and answer["realm"] == ""


@pytest.mark.parametrize("text,expected", [
    (b'a="x,y",b=z', {"a": "x,y", "b": "z"}),
    (b' A = "q\\"uote" , b=1', {"a": 'q"uote', "b": "1"}),
    (b'k=""', {"k": ""}),
])
def test_directives(text, expected):
    assert parse_directives(text) == expected
