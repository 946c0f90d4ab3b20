"""The ``barrier:`` section of the configuration, typed (see conf/defaults.yaml for every knob)."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gangmaster.am.barrier.coordinator import YEAR_S
from gangmaster.protocol.grpc_security import read_key_pair
from gangmaster.conf.fields import ConfigError, Fields
from gangmaster.conf.limits import (BARRIER_MAX_MESSAGE_BYTES, BARRIER_MAX_MESSAGE_BYTES_CEILING,
                                    BARRIER_MAX_PENDING_CALLS, MAX_DURATION_S, MIN_PERIOD_S)

SECTION = "barrier"
KNOWN = ("timeout_s", "log_interval_s", "max_pending_calls", "host", "port", "advertise_host",
         "retry_give_up_s", "max_message_bytes", "tls")
CERT_FIELD, KEY_FIELD = "barrier.tls.cert_file", "barrier.tls.key_file"


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
            timeout_s=f.number("timeout_s", YEAR_S, minimum=0, exclusive_minimum=True,
                               maximum=MAX_DURATION_S, limit="MAX_DURATION_S"),
            log_interval_s=f.number("log_interval_s", 60.0, minimum=MIN_PERIOD_S,
                                    maximum=MAX_DURATION_S, limit="MAX_DURATION_S"),
            max_pending_calls=f.integer("max_pending_calls", 65536, minimum=1,
                                        maximum=BARRIER_MAX_PENDING_CALLS, limit="BARRIER_MAX_PENDING_CALLS"),
            host=f.string("host", "127.0.0.1"),
            port=f.integer("port", 0, minimum=0, maximum=65535),
            advertise_host=_optional_string(f, "advertise_host"),
            retry_give_up_s=f.number("retry_give_up_s", 300.0, minimum=0, maximum=MAX_DURATION_S,
                                     limit="MAX_DURATION_S"),
            max_message_bytes=f.integer("max_message_bytes", BARRIER_MAX_MESSAGE_BYTES, minimum=1024,
                                        maximum=BARRIER_MAX_MESSAGE_BYTES_CEILING,
                                        limit="BARRIER_MAX_MESSAGE_BYTES_CEILING"),
            tls_cert_file=cert,
            tls_key_file=key,
        )

    def read_tls(self) -> tuple[bytes, bytes]:
        """The PEM certificate chain and private key to serve TLS with, checked by
        :func:`~gangmaster.protocol.grpc_security.read_key_pair`: a file that is missing,
        unreadable, not PEM, or a key that does not match the certificate raises
        :class:`~gangmaster.conf.fields.ConfigError` naming the file and the field."""
        for path, field in ((self.tls_cert_file, CERT_FIELD), (self.tls_key_file, KEY_FIELD)):
            if path is None:
                raise ConfigError("barrier configuration", field,
                                  "a PEM file path (TLS needs both cert_file and key_file)")
        return read_key_pair(self.tls_cert_file, self.tls_key_file, CERT_FIELD, KEY_FIELD)

    @classmethod
    def load(cls, override: str | Path | None = None) -> "BarrierConfig":
        """The defaults file's ``barrier:`` section, with an override file on top."""
        from gangmaster.conf.settings import Settings

        return cls.from_fields(Settings(override).section(SECTION))


def _optional_string(f: Fields, key: str) -> str | None:
    return None if f.raw(key, None) is None else f.string(key)
