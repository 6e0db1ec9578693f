# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers: the fingerprints of an OpenPGP public key (RFC 4880 / RFC 9580), with
no gpg on the node. Enough to check that an apt repository key is the pinned one before
apt trusts it. Not a public API.

A v4 key's fingerprint is SHA-1 over 0x99, the two-byte length and the public-key packet
body; v5 uses 0x9A and v6 0x9B with a four-byte length and SHA-256.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import binascii
import hashlib
import re
import struct

PUBLIC_KEY = 6
PUBLIC_SUBKEY = 14
_BEGIN = "-----BEGIN PGP PUBLIC KEY BLOCK-----"
_END = "-----END PGP PUBLIC KEY BLOCK-----"
_CRC24_INIT = 0xB704CE
_CRC24_POLY = 0x1864CFB


class OpenPGPError(ValueError):
    """The data is not an OpenPGP public key this module can read."""


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


def dearmor(data):
    """Binary packets of an ASCII-armored public key block (the first one); the armor
    checksum, when present, must match."""
    text = data.decode("ascii", "replace") if isinstance(data, bytes) else data
    start = text.find(_BEGIN)
    end = text.find(_END, start)
    if start < 0 or end < 0:
        raise OpenPGPError("no complete '%s' block" % _BEGIN)
    lines = [line.strip() for line in text[start + len(_BEGIN):end].splitlines()]
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


def armor(packets):
    """ASCII armor for binary public key packets (64 columns, with the CRC-24 line)."""
    encoded = base64.b64encode(packets).decode("ascii")
    lines = [encoded[i:i + 64] for i in range(0, len(encoded), 64)]
    checksum = base64.b64encode(struct.pack(">I", crc24(packets))[1:]).decode("ascii")
    return "\n".join([_BEGIN, ""] + lines + ["=" + checksum, _END]) + "\n"


def packets(data):
    """``(tag, body)`` of each OpenPGP packet in binary ``data`` (old and new formats)."""
    data = bytearray(data)
    pos, out = 0, []
    while pos < len(data):
        header = data[pos]
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
        out.append((tag, bytes(data[pos:pos + length])))
        pos += length
    return out


def key_fingerprint(body):
    """Upper-case hex fingerprint of a public key or subkey packet body, or None for v3 keys."""
    version = bytearray(body[:1])[0] if body else None
    if version == 4:
        return hashlib.sha1(b"\x99" + struct.pack(">H", len(body)) + body).hexdigest().upper()
    if version in (5, 6):
        prefix = b"\x9a" if version == 5 else b"\x9b"
        return hashlib.sha256(prefix + struct.pack(">I", len(body)) + body).hexdigest().upper()
    return None


def fingerprints(data):
    """``(primary, subkeys)``: fingerprints of the primary keys and of the subkeys in ``data``
    (armored or binary). Raises OpenPGPError when it holds no public key."""
    binary = dearmor(data) if is_armored(data) else bytes(data)
    primary, subkeys = [], []
    for tag, body in packets(binary):
        if tag in (PUBLIC_KEY, PUBLIC_SUBKEY):
            fpr = key_fingerprint(body)
            if fpr:
                (primary if tag == PUBLIC_KEY else subkeys).append(fpr)
    if not primary:
        raise OpenPGPError("no OpenPGP public key (v4 or later) in the data")
    return primary, subkeys


def normalize_fingerprint(value):
    """``'9DC8 5822 ...'`` or ``'0x9dc8...'`` as 40 or 64 upper-case hex digits, or None when it is not one."""
    text = re.sub(r"\s+", "", str(value or ""))
    if text.lower().startswith("0x"):
        text = text[2:]
    text = text.upper()
    return text if re.match(r"^([0-9A-F]{40}|[0-9A-F]{64})$", text) else None
