"""apt_keyring through real ansible on localhost, fetching over real HTTP from a server in
this process. Expected fingerprints are GnuPG's (fixtures/openpgp/fingerprints.json)."""

import functools
import http.server
import json
import os
import stat
import sys
import threading

import pytest

from ansible_collections.dgx_spark.glm53.tests.unit.plugins import ansiballz

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
KEYS = os.path.join(ROOT, "tests", "unit", "fixtures", "openpgp")
RSA = "C34F04608C32118FBA3EBE4B050564DA38A7F679"
ED25519 = "CA215C0AF039ABFF7530B01861A32E1678A9573F"


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    """Serves tmp_path/www; .requests counts what was fetched."""
    www = tmp_path / "www"
    www.mkdir()
    requests = []

    class Handler(_Quiet):
        def do_GET(self):
            requests.append(self.path)
            super().do_GET()

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=str(www)))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    httpd.www, httpd.requests = www, requests
    httpd.url = "http://127.0.0.1:%d" % httpd.server_address[1]
    yield httpd
    httpd.shutdown()


def publish(server, name, fixture):
    with open(os.path.join(KEYS, fixture), "rb") as handle:
        (server.www / name).write_bytes(handle.read())
    return "%s/%s" % (server.url, name)


def ansible(args, check=False):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="json", no_proxy="127.0.0.1",
               NO_PROXY="127.0.0.1")
    cmd = [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost", "-c", "local",
           "-m", "dgx_spark.glm53.apt_keyring", "-a", json.dumps(args)] + (["--check"] if check else [])
    proc = ansiballz.run(cmd, cwd=ROOT, env=env, timeout=120)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_pinned_key_is_installed_once_then_never_fetched_again(server, tmp_path):
    url = publish(server, "gpg", "rsa-with-subkey.asc")
    dest = tmp_path / "keyrings" / "docker.asc"
    spaced = " ".join(RSA[i:i + 4] for i in range(0, 40, 4))
    first = ansible({"url": url, "dest": str(dest), "fingerprint": spaced})
    assert first["changed"] is True and first["fetched"] is True, first
    assert first["fingerprints"] == [RSA] and first["fingerprint"] == RSA
    with open(os.path.join(KEYS, "rsa-with-subkey.asc"), "rb") as handle:
        assert dest.read_bytes() == handle.read()
    assert stat.S_IMODE(dest.stat().st_mode) == 0o644
    second = ansible({"url": url, "dest": str(dest), "fingerprint": RSA})
    assert second["changed"] is False and second["fetched"] is False
    assert server.requests == ["/gpg"]


def test_another_key_is_refused_and_nothing_written(server, tmp_path):
    url = publish(server, "gpgkey", "ed25519.asc")
    dest = tmp_path / "nvidia.asc"
    result = ansible({"url": url, "dest": str(dest), "fingerprint": RSA})
    assert result["failed"] is True
    assert result["msg"].startswith("the key at %s has fingerprint %s, not the pinned %s: refused, nothing was installed."
                                    % (url, ED25519, RSA))
    assert not dest.exists()


def test_a_replaced_key_file_is_fixed(server, tmp_path):
    dest = tmp_path / "docker.asc"
    with open(os.path.join(KEYS, "ed25519.asc"), "rb") as handle:
        dest.write_bytes(handle.read())
    url = publish(server, "gpg", "rsa-with-subkey.asc")
    result = ansible({"url": url, "dest": str(dest), "fingerprint": RSA})
    assert result["changed"] is True and result["fingerprints"] == [RSA]


def fixture(name):
    with open(os.path.join(KEYS, name), "rb") as handle:
        return handle.read()


@pytest.mark.parametrize("published", [
    "two-keys.asc",  # gpg --export --armor of both keys: one block, two primary keys
    "rsa-with-subkey.asc+ed25519.asc",  # a second armored block appended to the pinned key's
])
def test_a_second_key_next_to_the_pinned_one_is_refused_naming_both(server, tmp_path, published):
    (server.www / "gpg").write_bytes(b"".join(fixture(name) for name in published.split("+")))
    url = server.url + "/gpg"
    dest = tmp_path / "docker.asc"
    result = ansible({"url": url, "dest": str(dest), "fingerprint": RSA})
    assert result["failed"] is True
    assert result["msg"] == (
        "the key file at %s holds 2 primary keys: %s, %s; expected exactly one, the pinned %s: refused, nothing was "
        "installed (Signed-By trusts every key in the file). Check the URL, or ask the publisher for a file with its "
        "repository key alone." % (url, RSA, ED25519, RSA))
    assert result["fingerprints"] == [RSA, ED25519]
    assert not dest.exists()


def _with_comment(data):
    return data.replace(b"-----\n\n", b"-----\nComment: added by hand\n\n", 1)


@pytest.mark.parametrize("existing, why", [
    (fixture("two-keys.asc"), "holds 2 primary keys: %s, %s" % (RSA, ED25519)),
    (fixture("rsa-with-subkey.asc") + fixture("ed25519.asc"), "holds 2 primary keys: %s, %s" % (RSA, ED25519)),
    (_with_comment(fixture("rsa-with-subkey.asc")), "holds more than the pinned key's packets"),
])
def test_an_existing_keyring_with_anything_else_is_replaced_by_the_key_alone(server, tmp_path, existing, why):
    url = publish(server, "gpg", "rsa-with-subkey.asc")
    dest = tmp_path / "docker.asc"
    dest.write_bytes(existing)
    dry = ansible({"url": url, "dest": str(dest), "fingerprint": RSA}, check=True)
    assert dry["changed"] is True and why in dry["msg"], dry["msg"]
    assert dest.read_bytes() == existing and server.requests == []
    first = ansible({"url": url, "dest": str(dest), "fingerprint": RSA})
    assert first["changed"] is True and first["fetched"] is True and first["fingerprints"] == [RSA]
    assert dest.read_bytes() == fixture("rsa-with-subkey.asc")
    second = ansible({"url": url, "dest": str(dest), "fingerprint": RSA})
    assert second["changed"] is False and second["fetched"] is False and server.requests == ["/gpg"]


def test_a_binary_keyring_with_an_extra_key_is_replaced(server, tmp_path):
    url = publish(server, "gpg", "rsa-with-subkey.asc")
    dest = tmp_path / "docker.gpg"
    dest.write_bytes(fixture("two-keys.gpg"))
    result = ansible({"url": url, "dest": str(dest), "fingerprint": RSA})
    assert result["changed"] is True and dest.read_bytes() == fixture("rsa-with-subkey.gpg")


def test_binary_keyring_from_an_armored_key(server, tmp_path):
    url = publish(server, "gpg", "rsa-with-subkey.asc")
    dest = tmp_path / "docker.gpg"
    assert ansible({"url": url, "dest": str(dest), "fingerprint": RSA})["changed"] is True
    with open(os.path.join(KEYS, "rsa-with-subkey.gpg"), "rb") as handle:
        assert dest.read_bytes() == handle.read()


def test_check_mode_neither_fetches_nor_writes(server, tmp_path):
    url = publish(server, "gpg", "rsa-with-subkey.asc")
    dest = tmp_path / "docker.asc"
    result = ansible({"url": url, "dest": str(dest), "fingerprint": RSA}, check=True)
    assert result["changed"] is True and not dest.exists() and server.requests == []


@pytest.mark.parametrize("content, fragment", [
    (None, "cannot fetch the key from"),
    (b"<html>moved</html>", "did not return an OpenPGP public key"),
])
def test_unusable_answers(server, tmp_path, content, fragment):
    if content is not None:
        (server.www / "gpg").write_bytes(content)
    dest = tmp_path / "docker.asc"
    result = ansible({"url": server.url + "/gpg", "dest": str(dest), "fingerprint": RSA})
    assert result["failed"] is True and fragment in result["msg"], result["msg"]
    assert not dest.exists()


@pytest.mark.parametrize("args, fragment", [
    ({"fingerprint": "0EBFCD88"}, "fingerprint must be a full key fingerprint"),
    ({"dest": "/etc/apt/keyrings/docker.key"}, "dest must end in .asc (armored) or .gpg (binary)"),
])
def test_bad_arguments(tmp_path, args, fragment):
    base = {"url": "http://127.0.0.1:9/gpg", "dest": str(tmp_path / "docker.asc"), "fingerprint": RSA}
    result = ansible(dict(base, **args))
    assert result["failed"] is True and fragment in result["msg"]
