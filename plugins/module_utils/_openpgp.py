# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers: the fingerprints of an OpenPGP public key (RFC 4880 / RFC 9580), with
no gpg on the node. Enough to check that an apt repository key is the pinned one before
apt trusts it, and to keep only that key's packets. Not a public API.

A v4 key's fingerprint is SHA-1 over 0x99, the two-byte length and the public-key packet
body; v5 uses 0x9A and v6 0x9B with a four-byte length and SHA-256.

A keyring named in a source's ``Signed-By`` trusts every primary key in it, so
``pinned_key`` accepts exactly one primary key and returns only its transferable-key
packets (RFC 4880 11.1): the public key, its user IDs and user attributes, its subkeys
and the signatures that follow each of them, in the order the publisher gave. Marker,
trust and padding packets carry no key material and are dropped; any other packet (a
secret key, data) refuses the file. Signatures are not verified here: apt's verifier
(sqv or gpgv) uses a subkey only with a binding signature by the primary key, so a
subkey appended without one cannot sign for the repository.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import re
import struct

SIGNATURE = 2
PUBLIC_KEY = 6
MARKER = 10
TRUST = 12
USER_ID = 13
PUBLIC_SUBKEY = 14
USER_ATTRIBUTE = 17
PADDING = 21
# What may follow a primary key inside one transferable public key.
_KEY_PARTS = (SIGNATURE, USER_ID, PUBLIC_SUBKEY, USER_ATTRIBUTE)
# Dropped wherever they are: no key material (gpg's local trust, RFC 4880 markers, RFC 9580 padding).
_DROPPED = (MARKER, TRUST, PADDING)
_NAMES = {1: "public-key encrypted session key", 3: "symmetric-key encrypted session key", 5: "secret key",
          7: "secret subkey", 8: "compressed data", 9: "symmetrically encrypted data", 11: "literal data",
          18: "encrypted and integrity protected data"}
_BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
_END = "-----END PGP PUBLIC KEY BLOCK-----"
_ANY_BEGIN = re.compile(r"-----BEGIN PGP ([A-Z0-9 ,/]+)-----")
_CRC24_INIT = 0xB704CE
_CRC24_POLY = 0x1864CFB


class OpenPGPError(ValueError):
    """The data is not an OpenPGP public key this module can read."""


class KeyMismatch(OpenPGPError):
    """The data holds public keys, but not exactly one with the pinned fingerprint.
    ``found``: the primary fingerprints, in the order of the data."""

    def __init__(self, message, found):
        super(KeyMismatch, self).__init__(message)
        self.found = found


def crc24(data):
    crc = _CRC24_INIT
    for byte in bytearray(data):
        crc ^= byte << 16
        for _bit in range(8):
            crc <<= 1
            if crc & 0x1000000:
                crc ^= _CRC24_POLY
    return crc & 0xFFFFFF


def is_armored(data):
    return _BEGIN.encode("ascii") in data


def _dearmor_block(text):
    """Binary packets of one armored block's body (between the BEGIN and END lines); the
    armor checksum, when present, must match."""
    lines = [line.strip() for line in text.splitlines()]
    body, checksum = [], None
    for line in lines:
        # Blank lines, and armor headers (Version:, Comment:), whose ':' base64 never has.
        if not line or ":" in line:
            continue
        if line.startswith("=") and len(line) == 5:
            checksum = line[1:]
            break
        body.append(line)
    try:
        packets = base64.b64decode("".join(body).encode("ascii"))
    except (binascii.Error, ValueError) as exc:
        raise OpenPGPError("the armored key is not valid base64 (%s)" % exc)
    if checksum is not None:
        try:
            want = struct.unpack(">I", b"\0" + base64.b64decode(checksum.encode("ascii")))[0]
        except (binascii.Error, ValueError, struct.error):
            raise OpenPGPError("the armor checksum line is not valid")
        if crc24(packets) != want:
            raise OpenPGPError("the armor checksum does not match (the key was damaged in transit)")
    return packets


def dearmor(data):
    """Binary packets of every ASCII-armored public key block in ``data``, concatenated in
    order (gpg imports them all, so a check must see them all). Text outside the blocks is
    ignored; an armored block of another kind (a signature, a private key) is refused."""
    text = data.decode("ascii", "replace") if isinstance(data, bytes) else data
    out, pos = [], 0
    while True:
        match = _ANY_BEGIN.search(text, pos)
        if match is None:
            break
        if match.group(0) != _BEGIN:
            raise OpenPGPError("it holds a '%s' block; a keyring takes public key blocks only" % match.group(0))
        end = text.find(_END, match.end())
        if end < 0:
            raise OpenPGPError("no complete '%s' block" % _BEGIN)
        out.append(_dearmor_block(text[match.end():end]))
        pos = end + len(_END)
    if not out:
        raise OpenPGPError("no complete '%s' block" % _BEGIN)
    return b"".join(out)


def armor(packets):
    """ASCII armor for binary public key packets (64 columns, with the CRC-24 line)."""
    encoded = base64.b64encode(packets).decode("ascii")
    lines = [encoded[i:i + 64] for i in range(0, len(encoded), 64)]
    checksum = base64.b64encode(struct.pack(">I", crc24(packets))[1:]).decode("ascii")
    return "\n".join([_BEGIN, ""] + lines + ["=" + checksum, _END]) + "\n"


def _split(data):
    """``(tag, body, raw)`` of each OpenPGP packet in binary ``data`` (old and new formats);
    ``raw`` is the packet as it came, header included."""
    data = bytearray(data)
    pos, out = 0, []
    while pos < len(data):
        start, header = pos, data[pos]
        if not header & 0x80:
            raise OpenPGPError("byte %d is not an OpenPGP packet header" % pos)
        pos += 1
        if header & 0x40:  # new format
            tag = header & 0x3F
            if pos >= len(data):
                raise OpenPGPError("truncated packet header")
            first = data[pos]
            if first < 192:
                length, pos = first, pos + 1
            elif first < 224:
                if pos + 1 >= len(data):
                    raise OpenPGPError("truncated packet length")
                length, pos = ((first - 192) << 8) + data[pos + 1] + 192, pos + 2
            elif first == 255:
                if pos + 4 >= len(data):
                    raise OpenPGPError("truncated packet length")
                length, pos = struct.unpack(">I", bytes(data[pos + 1:pos + 5]))[0], pos + 5
            else:
                raise OpenPGPError("partial body lengths do not occur in a public key")
        else:  # old format
            tag, kind = (header >> 2) & 0x0F, header & 0x03
            if kind == 3:
                length = len(data) - pos
            else:
                size = (1, 2, 4)[kind]
                if pos + size > len(data):
                    raise OpenPGPError("truncated packet length")
                length = int(binascii.hexlify(bytes(data[pos:pos + size])), 16)
                pos += size
        if pos + length > len(data):
            raise OpenPGPError("packet %d runs past the end of the data" % tag)
        out.append((tag, bytes(data[pos:pos + length]), bytes(data[start:pos + length])))
        pos += length
    return out


def packets(data):
    """``(tag, body)`` of each OpenPGP packet in binary ``data`` (old and new formats)."""
    return [(tag, body) for tag, body, _raw in _split(data)]


def key_fingerprint(body):
    """Upper-case hex fingerprint of a public key or subkey packet body, or None for v3 keys."""
    version = bytearray(body[:1])[0] if body else None
    if version == 4:
        return hashlib.sha1(b"\x99" + struct.pack(">H", len(body)) + body).hexdigest().upper()
    if version in (5, 6):
        prefix = b"\x9a" if version == 5 else b"\x9b"
        return hashlib.sha256(prefix + struct.pack(">I", len(body)) + body).hexdigest().upper()
    return None


def _binary(data):
    return dearmor(data) if is_armored(data) else bytes(data)


def fingerprints(data):
    """``(primary, subkeys)``: fingerprints of the primary keys and of the subkeys in ``data``
    (armored or binary). Raises OpenPGPError when it holds no public key."""
    primary, subkeys = [], []
    for tag, body in packets(_binary(data)):
        if tag in (PUBLIC_KEY, PUBLIC_SUBKEY):
            fpr = key_fingerprint(body)
            if fpr:
                (primary if tag == PUBLIC_KEY else subkeys).append(fpr)
    if not primary:
        raise OpenPGPError("no OpenPGP public key (v4 or later) in the data")
    return primary, subkeys


def transferable_keys(data):
    """``[(fingerprint, packets)]``: each primary key in ``data`` (armored or binary) with the
    raw packets that belong to it, marker, trust and padding packets left out. The
    fingerprint is None for a v3 key. Raises OpenPGPError for packets that do not belong
    in a public key and for data with no key."""
    keys = []
    for tag, body, raw in _split(_binary(data)):
        if tag in _DROPPED:
            continue
        if tag == PUBLIC_KEY:
            keys.append((key_fingerprint(body), [raw]))
        elif tag in _KEY_PARTS and keys:
            keys[-1][1].append(raw)
        elif tag in _KEY_PARTS:
            raise OpenPGPError("a packet of type %d comes before any public key" % tag)
        else:
            raise OpenPGPError("it holds a %s packet (type %d), which does not belong in a public key"
                               % (_NAMES.get(tag, "non-key"), tag))
    if not keys:
        raise OpenPGPError("no OpenPGP public key (v4 or later) in the data")
    return keys


def pinned_key(data, pinned):
    """The binary keyring to install: the packets of the one primary key in ``data``, which
    must have the ``pinned`` fingerprint. Raises KeyMismatch naming what was found
    (``2 primary keys: A, B`` or ``fingerprint A, not the pinned P``)."""
    keys = transferable_keys(data)
    found = [fpr or "a version 3 key (no fingerprint)" for fpr, _parts in keys]
    if len(keys) != 1:
        raise KeyMismatch("%d primary keys: %s" % (len(keys), ", ".join(found)), found)
    if keys[0][0] != pinned:
        raise KeyMismatch("fingerprint %s, not the pinned %s" % (found[0], pinned), found)
    return b"".join(keys[0][1])


def keyring_file(binary, armored):
    """The bytes of a keyring file: the ASCII armor for ``.asc``, the packets for ``.gpg``."""
    return armor(binary).encode("ascii") if armored else binary


def normalize_fingerprint(value):
    """``'9DC8 5822 ...'`` or ``'0x9dc8...'`` as 40 or 64 upper-case hex digits, or None when it is not one."""
    text = re.sub(r"\s+", "", str(value or ""))
    if text.lower().startswith("0x"):
        text = text[2:]
    text = text.upper()
    return text if re.match(r"^([0-9A-F]{40}|[0-9A-F]{64})$", text) else None
