"""The ``barrier:`` section of the configuration, typed (see conf/defaults.yaml for every knob)."""
from __future__ import annotations

import re
import ssl
from dataclasses import dataclass
from pathlib import Path

from gangmaster.am.barrier import YEAR_S
from gangmaster.conf.fields import ConfigError, Fields
from gangmaster.conf.limits import BARRIER_MAX_MESSAGE_BYTES, BARRIER_MAX_MESSAGE_BYTES_CEILING

SECTION = "barrier"
KNOWN = ("timeout_s", "log_interval_s", "max_pending_calls", "host", "port", "advertise_host",
         "retry_give_up_s", "max_message_bytes", "tls")
CERT_FIELD, KEY_FIELD = "barrier.tls.cert_file", "barrier.tls.key_file"
_PEM_CERT = re.compile(rb"-----BEGIN CERTIFICATE-----")
_PEM_KEY = re.compile(rb"-----BEGIN [A-Z ]*PRIVATE KEY-----")


@dataclass(frozen=True)
class BarrierConfig:
    """How the coordinator serves and how long barriers and tasks wait."""

    timeout_s: float = YEAR_S
    log_interval_s: float = 60.0
    max_pending_calls: int = 65536
    host: str = "127.0.0.1"
    port: int = 0
    advertise_host: str | None = None
    retry_give_up_s: float = 300.0
    max_message_bytes: int = BARRIER_MAX_MESSAGE_BYTES
    tls_cert_file: str | None = None
    tls_key_file: str | None = None

    @property
    def tls(self) -> bool:
        return self.tls_cert_file is not None

    @classmethod
    def from_fields(cls, f: Fields) -> "BarrierConfig":
        f.reject_unknown(KNOWN)
        tls = f.mapping("tls", {})
        tls.reject_unknown(("cert_file", "key_file"))
        cert = _optional_string(tls, "cert_file")
        key = _optional_string(tls, "key_file")
        if (cert is None) != (key is None):
            missing = "key_file" if key is None else "cert_file"
            raise tls.error(missing, "a PEM file path (TLS needs both cert_file and key_file)", None)
        return cls(
            timeout_s=f.number("timeout_s", YEAR_S, minimum=0, exclusive_minimum=True),
            log_interval_s=f.number("log_interval_s", 60.0, minimum=0, exclusive_minimum=True),
            max_pending_calls=f.integer("max_pending_calls", 65536, minimum=1),
            host=f.string("host", "127.0.0.1"),
            port=f.integer("port", 0, minimum=0, maximum=65535),
            advertise_host=_optional_string(f, "advertise_host"),
            retry_give_up_s=f.number("retry_give_up_s", 300.0, minimum=0),
            max_message_bytes=f.integer("max_message_bytes", BARRIER_MAX_MESSAGE_BYTES, minimum=1024,
                                        maximum=BARRIER_MAX_MESSAGE_BYTES_CEILING),
            tls_cert_file=cert,
            tls_key_file=key,
        )

    def read_tls(self) -> tuple[bytes, bytes]:
        """The PEM certificate chain and private key to serve TLS with, checked: a file
        that is missing, unreadable, not PEM, or a key that does not match the
        certificate raises :class:`ConfigError` naming the file and the field."""
        cert = _read_pem(self.tls_cert_file, CERT_FIELD, _PEM_CERT, "a PEM certificate")
        key = _read_pem(self.tls_key_file, KEY_FIELD, _PEM_KEY, "a PEM private key")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        try:
            context.load_verify_locations(cadata=cert.decode("ascii", "replace"))
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError(str(self.tls_cert_file), CERT_FIELD, f"a PEM certificate ({_why(exc)})") from None
        try:
            context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
        except (ssl.SSLError, ValueError) as exc:
            raise ConfigError(str(self.tls_key_file), KEY_FIELD,
                              f"a PEM private key matching {CERT_FIELD} ({_why(exc)})") from None
        return cert, key

    @classmethod
    def load(cls, override: str | Path | None = None) -> "BarrierConfig":
        """The defaults file's ``barrier:`` section, with an override file on top."""
        from gangmaster.conf.settings import Settings

        return cls.from_fields(Settings(override).section(SECTION))


def _optional_string(f: Fields, key: str) -> str | None:
    return None if f.raw(key, None) is None else f.string(key)


def _read_pem(path: str | None, field: str, marker: re.Pattern, what: str) -> bytes:
    if path is None:
        raise ConfigError("barrier configuration", field, f"{what} file (TLS needs both cert_file and key_file)")
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(str(path), field, f"an existing file holding {what}") from None
    except OSError as exc:
        raise ConfigError(str(path), field, f"a readable file holding {what} ({exc.strerror})") from None
    if not marker.search(data):
        raise ConfigError(str(path), field, f"{what} (no PEM block of that kind in the file)")
    return data


def _why(exc: Exception) -> str:
    return getattr(exc, "reason", None) or str(exc)
