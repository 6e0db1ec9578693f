"""_openpgp: key fingerprints without gpg. The expected values come from GnuPG: recorded
when the fixture keys were made (fixtures/openpgp/fingerprints.json), and
asked live about the keys on this machine (gpg is required for that: package gpg)."""

import glob
import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _openpgp as pgp
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.processes import require

FIXTURES = os.path.join(os.path.dirname(__file__), "..", "..", "fixtures", "openpgp")
with open(os.path.join(FIXTURES, "fingerprints.json")) as _handle:
    EXPECTED = dict((k, v) for k, v in json.load(_handle).items() if not k.startswith("_"))


def read(name):
    with open(os.path.join(FIXTURES, name), "rb") as handle:
        return handle.read()


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fingerprints_match_gnupg(name):
    primary, subkeys = pgp.fingerprints(read(name))
    assert primary == EXPECTED[name]["primary"]
    assert subkeys == EXPECTED[name]["subkeys"]


def test_armored_and_binary_forms_are_the_same_key():
    assert pgp.dearmor(read("rsa-with-subkey.asc")) == read("rsa-with-subkey.gpg")


def test_armor_round_trip_with_a_checksum_gnupg_accepts():
    binary = read("rsa-with-subkey.gpg")
    armored = pgp.armor(binary)
    assert armored.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n")
    assert pgp.dearmor(armored) == binary
    # gpg's own armor carries the same CRC-24 line.
    assert [line for line in armored.splitlines() if line.startswith("=")] == \
        [line for line in read("rsa-with-subkey.asc").decode().splitlines() if line.startswith("=")]


def test_armor_headers_and_indentation_are_tolerated():
    text = read("ed25519.asc").decode()
    lines = text.splitlines()
    with_header = "\n".join(lines[:1] + ["Comment: fetched from somewhere"] + lines[1:])
    indented = "\n".join("    " + line for line in with_header.splitlines())
    assert pgp.fingerprints(indented.encode())[0] == EXPECTED["ed25519.asc"]["primary"]


def test_a_damaged_key_is_refused():
    text = read("ed25519.asc").decode()
    lines = text.splitlines()
    body = lines[2]
    lines[2] = body[:10] + ("A" if body[10] != "A" else "B") + body[11:]
    with pytest.raises(pgp.OpenPGPError, match="checksum does not match"):
        pgp.fingerprints("\n".join(lines).encode())


@pytest.mark.parametrize("data, message", [
    (b"<html>not found</html>", "not an OpenPGP packet header"),
    (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nmQ==\n", "no complete"),
    (b"\x99\x00\x05abc", "runs past the end"),
])
def test_garbage_is_refused(data, message):
    with pytest.raises(pgp.OpenPGPError, match=message):
        pgp.fingerprints(data)


RSA = EXPECTED["rsa-with-subkey.asc"]["primary"][0]
ED25519 = EXPECTED["ed25519.asc"]["primary"][0]
# RFC 4880 4.2 old-format headers (0x80 | tag << 2, one length byte): a marker packet (10,
# body "PGP") and a literal data packet (11), as an attacker or a careless tool could add.
MARKER = b"\xa8\x03PGP"
LITERAL = b"\xac\x07b\x00\x00\x00\x00\x00x"


def test_every_armored_block_is_read():
    # gpg imports every block of a file; the check must see the appended key too.
    appended = read("rsa-with-subkey.asc") + read("ed25519.asc")
    assert pgp.fingerprints(appended) == ([RSA, ED25519], EXPECTED["rsa-with-subkey.asc"]["subkeys"])
    assert pgp.dearmor(appended) == read("rsa-with-subkey.gpg") + pgp.dearmor(read("ed25519.asc"))


@pytest.mark.parametrize("data, message", [
    (read("two-keys.asc"), "2 primary keys: %s, %s" % (RSA, ED25519)),
    (read("rsa-with-subkey.asc") + read("ed25519.asc"), "2 primary keys: %s, %s" % (RSA, ED25519)),
    (read("rsa-with-subkey.asc") * 2, "2 primary keys: %s, %s" % (RSA, RSA)),
    (read("ed25519.asc"), "fingerprint %s, not the pinned %s" % (ED25519, RSA)),
])
def test_anything_but_the_one_pinned_key_is_refused_naming_what_was_found(data, message):
    with pytest.raises(pgp.KeyMismatch) as caught:
        pgp.pinned_key(data, RSA)
    assert str(caught.value) == message


def test_the_pinned_key_keeps_its_own_packets_only():
    # gpg's binary export of the key is exactly what is kept: key, user ID, subkey, signatures.
    assert pgp.pinned_key(read("rsa-with-subkey.asc"), RSA) == read("rsa-with-subkey.gpg")
    assert pgp.pinned_key(MARKER + read("rsa-with-subkey.gpg") + MARKER, RSA) == read("rsa-with-subkey.gpg")
    assert pgp.keyring_file(pgp.pinned_key(read("rsa-with-subkey.gpg"), RSA), armored=True) == \
        read("rsa-with-subkey.asc")


@pytest.mark.parametrize("data, message", [
    (read("rsa-with-subkey.gpg") + LITERAL, "it holds a literal data packet (type 11)"),
    (b"\x88\x01\x00" + read("rsa-with-subkey.gpg"), "a packet of type 2 comes before any public key"),
    (read("rsa-with-subkey.asc") + b"-----BEGIN PGP SIGNATURE-----\n\nabc\n-----END PGP SIGNATURE-----\n",
     "it holds a '-----BEGIN PGP SIGNATURE-----' block"),
])
def test_what_does_not_belong_in_a_public_key_is_refused(data, message):
    with pytest.raises(pgp.OpenPGPError) as caught:
        pgp.pinned_key(data, RSA)
    assert message in str(caught.value)


@pytest.mark.parametrize("value, normalized", [
    ("9DC8 5822 9FC7 DD38 854A  E2D8 8D81 803C 0EBF CD88", "9DC858229FC7DD38854AE2D88D81803C0EBFCD88"),
    ("0xc95b321b61e88c1809c4f759ddcae044f796ecb0", "C95B321B61E88C1809C4F759DDCAE044F796ECB0"),
    ("0EBFCD88", None),
    ("", None),
    ("Z" * 40, None),
])
def test_normalize_fingerprint(value, normalized):
    assert pgp.normalize_fingerprint(value) == normalized


def _gpg_fingerprints(path):
    out = subprocess.run(["gpg", "--batch", "--with-colons", "--show-keys", path], capture_output=True, text=True,
                         check=True, env=dict(os.environ, GNUPGHOME=os.path.dirname(path))).stdout
    primary, subkeys, last = [], [], None
    for line in out.splitlines():
        fields = line.split(":")
        if fields[0] in ("pub", "sub"):
            last = fields[0]
        elif fields[0] == "fpr":
            (primary if last == "pub" else subkeys).append(fields[9])
    return primary, subkeys


def test_real_keyrings_on_this_machine_agree_with_gnupg(tmp_path):
    require("gpg", "gpg")  # GnuPG is the reference here: without it the test proves nothing
    keys = sorted(glob.glob("/usr/share/keyrings/*.gpg") + glob.glob("/etc/apt/trusted.gpg.d/*.asc"))[:12]
    if not keys:  # Debian always has debian-archive-keyring; another distribution may keep none there
        pytest.skip("no apt keyrings on this machine")
    for path in keys:
        copy = tmp_path / os.path.basename(path)
        shutil.copy(path, copy)
        with open(path, "rb") as handle:
            assert pgp.fingerprints(handle.read()) == _gpg_fingerprints(str(copy)), path
