"""Keys, JWTs and a scripted token endpoint shared by the OAUTHBEARER source tests."""

from __future__ import annotations

import base64
import json
import time
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from tests.fakes.http_peer import response_head

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
SECRET = "s3cret-Value/with+odd=chars"


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def unsigned_jwt(claims: dict[str, Any], header: dict[str, Any] | None = None) -> str:
    """A JWS-shaped token (the client never verifies signatures, so any third part does)."""
    head = header or {"alg": "RS256", "typ": "JWT"}
    return ".".join(
        (b64url(json.dumps(head).encode()), b64url(json.dumps(claims).encode()), "c2ln")
    )


def claims(lifetime_s: int = 300, **extra: Any) -> dict[str, Any]:
    now = int(time.time())
    out: dict[str, Any] = {"sub": "svc-writer", "iat": now, "exp": now + lifetime_s}
    out.update(extra)
    return out


def token_answer(token: str, status: int = 200, **fields: Any) -> bytes:
    body = json.dumps({"access_token": token, "token_type": "Bearer", **fields}).encode()
    return response_head(status, length=len(body)) + body


def raw_answer(body: bytes, status: int = 200) -> bytes:
    return response_head(status, length=len(body)) + body


def write_pem(path: Path, key: Any, passphrase: bytes | None = None) -> str:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(passphrase)
        if passphrase
        else serialization.NoEncryption()
    )
    path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption)
    )
    return str(path)


def form(request: bytes) -> dict[str, str]:
    """The form fields of a recorded request's body."""
    import urllib.parse

    body = request.partition(b"\r\n\r\n")[2].decode()
    return dict(urllib.parse.parse_qsl(body))


def header(request: bytes, name: str) -> str | None:
    head = request.partition(b"\r\n\r\n")[0].decode("latin-1")
    for line in head.split("\r\n")[1:]:
        key, _, value = line.partition(":")
        if key.strip().lower() == name.lower():
            return value.strip()
    return None
