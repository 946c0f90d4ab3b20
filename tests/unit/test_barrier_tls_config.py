"""The TLS files of ``barrier.tls`` are checked before the coordinator serves: a file
missing, unreadable or not PEM is a ConfigError naming the file and the field, not a
traceback."""
from __future__ import annotations


import pytest

from gangmaster.am.barrier.config import BarrierConfig
from gangmaster.am.barrier.server import BarrierServer
from gangmaster.conf.fields import ConfigError, Fields


def tls_config(tmp_path, cert: str, key: str) -> BarrierConfig:
    return BarrierConfig.from_fields(Fields({"tls": {"cert_file": cert, "key_file": key}},
                                            str(tmp_path / "job.yaml"), "barrier"))


@pytest.mark.parametrize("which", ["cert_file", "key_file"])
def test_a_missing_tls_file_names_the_file_and_the_field(tmp_path, self_signed, which):
    cert, key = self_signed()
    files = {"cert_file": str(cert), "key_file": str(key), which: str(tmp_path / "gone.pem")}
    config = tls_config(tmp_path, files["cert_file"], files["key_file"])
    with pytest.raises(ConfigError) as info:
        config.read_tls()
    assert info.value.field == f"barrier.tls.{which}"
    assert str(tmp_path / "gone.pem") in str(info.value) and "existing" in str(info.value)
    # and the server refuses to start with the same error, not a traceback
    server = BarrierServer(config)
    with pytest.raises(ConfigError, match=f"barrier.tls.{which}"):
        server.start()
    server.stop()


@pytest.mark.parametrize("which, text, expected", [
    ("cert_file", "hello", "a PEM certificate"),
    ("key_file", "hello", "a PEM private key"),
    ("cert_file", "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n", "a PEM certificate"),
    ("key_file", "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "cert_file"),
])
def test_a_tls_file_that_is_not_pem_names_the_file_and_the_field(tmp_path, self_signed, which, text, expected):
    cert, key = self_signed()
    bad = tmp_path / "bad.pem"
    bad.write_bytes(text.encode())
    files = {"cert_file": str(cert), "key_file": str(key), which: str(bad)}
    with pytest.raises(ConfigError) as info:
        BarrierServer(tls_config(tmp_path, files["cert_file"], files["key_file"])).start()
    assert info.value.field == f"barrier.tls.{which}" and str(bad) in str(info.value)
    assert expected in str(info.value)


def test_a_tls_file_that_is_a_folder_names_the_file_and_the_field(tmp_path, self_signed):
    cert, _ = self_signed()
    with pytest.raises(ConfigError, match="barrier.tls.key_file: expected a readable file"):
        tls_config(tmp_path, str(cert), str(tmp_path)).read_tls()


def test_matching_tls_files_are_read(tmp_path, self_signed):
    cert, key = self_signed()
    got_cert, got_key = tls_config(tmp_path, str(cert), str(key)).read_tls()
    assert got_cert == cert.read_bytes() and got_key == key.read_bytes()


@pytest.mark.parametrize("text, message", [
    ("barrier:\n  log_interval_s: 1.0e-9\n", "barrier.log_interval_s: expected a number"),
    ("barrier:\n  timeout_s: .inf\n", "barrier.timeout_s: expected a"),
    ("barrier:\n  retry_give_up_s: 1.0e+12\n", "MAX_DURATION_S"),
    ("barrier:\n  max_pending_calls: 100000000\n", "BARRIER_MAX_PENDING_CALLS"),
])
def test_barrier_knobs_that_cannot_work_are_refused(tmp_path, text, message):
    from gangmaster.am.barrier.config import BarrierConfig
    from gangmaster.conf.fields import ConfigError

    override = tmp_path / "o.yaml"
    override.write_text(text)
    with pytest.raises(ConfigError, match=message):
        BarrierConfig.load(override)
