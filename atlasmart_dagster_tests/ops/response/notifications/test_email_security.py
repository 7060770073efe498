"""Email over SMTP with STARTTLS and a login whose credentials come from the environment, never from the file."""

import shutil
import ssl
import subprocess

import pytest
from aiosmtpd.smtp import AuthResult, LoginPassword

from atlasmart_dagster.ops.response.notifications import deliver_pending
from atlasmart_dagster.store.ledger.notification_deliveries import FAILED, SENT

from .incidents_to_tell import config, open_incident
from .receivers import SmtpReceiver

DAY = "2026-09-20"
USER, PASSWORD = "atlasmart-mailer", "s3cret-smtp-pw"


@pytest.fixture
def tls_context(tmp_path, monkeypatch) -> ssl.SSLContext:
    """A self-signed certificate for 127.0.0.1 that this test's client trusts (``SSL_CERT_FILE``)."""
    if shutil.which("openssl") is None:
        pytest.fail("the openssl command is needed to make the test's certificate (Debian: openssl)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else value


def authenticator(seen: list):
    def check(server, session, envelope, mechanism, auth_data):
        seen.append(auth_data)
        ok = isinstance(auth_data, LoginPassword) and (_text(auth_data.login), _text(auth_data.password)) == (
            USER, PASSWORD)
        return AuthResult(success=ok, handled=False)  # not handled: the server answers 235 or 535 itself

    return check


def mail_config(smtp, starttls: bool = True):
    return config(f"  mail: {{kind: email, host: 127.0.0.1, port: {smtp.port}, from: atlasmart@atlasmart.example, "
                  f"to: oncall@atlasmart.example, starttls: {str(starttls).lower()}, username_env: SMTP_USER, "
                  f"password_env: SMTP_PASSWORD}}", "[mail]", delivery="{backoff_s: 0}")


def test_mail_goes_over_starttls_with_the_login_from_the_environment(env, tls_context, monkeypatch):
    seen = []
    smtp = SmtpReceiver(tls_context=tls_context, require_starttls=True, auth_required=True,
                        authenticator=authenticator(seen))
    try:
        monkeypatch.setenv("SMTP_USER", USER)
        monkeypatch.setenv("SMTP_PASSWORD", "not-the-password")
        open_incident(env.platform, DAY)
        (failed,) = deliver_pending(env.platform, config=mail_config(smtp)).failed
        assert failed["error"] == "SMTP login refused (535)" and smtp.mails == []
        monkeypatch.setenv("SMTP_PASSWORD", PASSWORD)
        (sent,) = deliver_pending(env.platform, config=mail_config(smtp)).sent
        assert sent["attempt"] == 2
        ((rcpt, mail),) = smtp.mails
        assert rcpt == ["oncall@atlasmart.example"] and mail["Subject"].startswith("[AtlasMart] INC-0001 opened")
        assert _text(seen[-1].password) == PASSWORD
        assert [r["outcome"] for r in env.ledger.notifications.attempts()] == [FAILED, SENT]
        assert PASSWORD not in str(env.ledger.notifications.attempts())
    finally:
        smtp.close()


def test_a_server_without_starttls_is_refused_when_the_channel_asks_for_it(env, smtp, monkeypatch):
    monkeypatch.setenv("SMTP_USER", USER)
    monkeypatch.setenv("SMTP_PASSWORD", PASSWORD)
    open_incident(env.platform, DAY)
    (failed,) = deliver_pending(env.platform, config=mail_config(smtp)).failed
    assert failed["error"] == ("the SMTP server does not offer what the channel needs: STARTTLS extension not "
                               "supported by server.")
    assert smtp.mails == []
