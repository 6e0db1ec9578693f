# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Private helpers: a hash-locked requirements file for an offline wheelhouse. Not a public API.

The lock is a pip requirements file (``pip install --require-hashes -r LOCK`` reads it as
it is) with one more thing pip ignores: above each requirement, a comment line per wheel,
``# sha256:<hex> <file name>``, so a wheel that does not match can be named together with
the hash the lock has for that very file. For example::

    # sha256:1f3c... pyyaml-6.0.4-cp312-cp312-manylinux2014_aarch64.manylinux_2_17_aarch64.whl
    # sha256:9ab0... pyyaml-6.0.4-cp312-cp312-manylinux2014_x86_64.manylinux_2_17_x86_64.whl
    pyyaml==6.0.4 \\
        --hash=sha256:1f3c... \\
        --hash=sha256:9ab0...

Every requirement is ``name==version`` with at least one ``--hash=sha256:``, and its file
comments name exactly its hashes. No environment markers and no other options: the lock
covers every supported platform with the same set of packages.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import hashlib
import os
import re

_FILE_LINE = re.compile(r"^#\s*sha256:([0-9a-f]{64})\s+(\S+\.whl)\s*$")
_REQUIREMENT = re.compile(r"^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)==([A-Za-z0-9][A-Za-z0-9.+!_-]*)$")
_HASH = re.compile(r"^--hash=sha256:([0-9a-f]{64})$")
_WHEEL = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(?:-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")
_CHUNK = 1 << 20
_MISMATCH_FIX = ("refused, nothing was installed. The file differs from the one the lock was made from: delete it "
                 "and the wheelhouse it was copied from (the node_venv role's is on the controller under "
                 "node_venv_wheelhouse, which hf_weights sets from hf_weights_wheelhouse) and rerun, so both are "
                 "downloaded again; if the package really changed, regenerate the lock with `make node-requirements`")


class LockError(ValueError):
    """A lock that cannot be used, or a wheel that does not match it; the message says which and the fix."""


def normalize(name):
    """PEP 503 name: ``typing_extensions`` -> ``typing-extensions``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_key(filename):
    """``(normalized name, version)`` of a wheel file name, or None."""
    match = _WHEEL.match(os.path.basename(filename))
    return (normalize(match.group("name")), match.group("version")) if match else None


def _logical_lines(text):
    """``(first line number, joined text)`` of each requirement, backslash continuations
    joined as pip joins them (a comment line ends a continuation); comments are lines of
    their own."""
    out, pending, start = [], "", None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line.startswith("#"):
            if pending:
                out.append((start, pending.strip()))
                pending, start = "", None
            out.append((number, line))
        elif line.endswith("\\"):
            start = start or number
            pending += line[:-1] + " "
        elif pending:
            out.append((start, pending + line))
            pending, start = "", None
        elif line:
            out.append((number, line))
    if pending:
        out.append((start, pending.strip()))
    return out


def parse_lock(text, label="the lock"):
    """``[{name, key, version, hashes, files}]`` in file order: ``key`` the normalized name,
    ``hashes`` the sha256 list of the ``--hash`` options, ``files`` ``{file name: sha256}``
    from the comments. Raises LockError naming the line."""
    entries, files, seen = [], {}, {}
    for number, line in _logical_lines(text):
        if line.startswith("#"):
            match = _FILE_LINE.match(line)
            if match:
                files[match.group(2)] = match.group(1)
            continue
        words = line.split()
        pin = _REQUIREMENT.match(words[0])
        if not pin:
            raise LockError("%s line %d: %r is not name==version; the lock pins every package exactly (regenerate "
                            "it with `make node-requirements`)" % (label, number, words[0]))
        hashes = []
        for word in words[1:]:
            match = _HASH.match(word)
            if not match:
                raise LockError("%s line %d: %r is not --hash=sha256:<64 hex digits> (no markers or other options "
                                "in a lock)" % (label, number, word))
            hashes.append(match.group(1))
        name, version = pin.groups()
        key = normalize(name)
        if not hashes:
            raise LockError("%s line %d: %s==%s has no --hash; every wheel is pinned by its sha256" % (
                label, number, name, version))
        if key in seen:
            raise LockError("%s line %d: %s is pinned again (first on line %d)" % (label, number, name, seen[key]))
        if sorted(set(files.values())) != sorted(set(hashes)):
            raise LockError("%s line %d: the file comments above %s==%s do not name exactly its hashes; regenerate "
                            "it with `make node-requirements`" % (label, number, name, version))
        seen[key] = number
        entries.append({"name": name, "key": key, "version": version, "hashes": hashes, "files": files})
        files = {}
    if not entries:
        raise LockError("%s pins no package" % label)
    return entries


def render_lock(entries, header):
    """The lock's text from ``[{name, version, files: {file name: sha256}}]`` (sorted by
    normalized name, files by name) under the ``header`` comment lines."""
    lines = ["# " + line if line else "#" for line in header]
    for entry in sorted(entries, key=lambda item: normalize(item["name"])):
        lines.append("")
        files = sorted(entry["files"].items())
        lines += ["# sha256:%s %s" % (digest, name) for name, digest in files]
        hashes = sorted(set(digest for _name, digest in files))
        lines.append("%s==%s \\" % (entry["name"], entry["version"]))
        lines += ["    --hash=sha256:%s%s" % (digest, " \\" if index < len(hashes) - 1 else "")
                  for index, digest in enumerate(hashes)]
    return "\n".join(lines) + "\n"


def read_lock(path):
    """``(entries, sha256 of the file)`` of the lock at ``path`` on this machine."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except (IOError, OSError) as exc:
        raise LockError("requirements_file %s cannot be read (%s); copy the role's hash lock there first"
                        % (path, exc.strerror or exc))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise LockError("requirements_file %s is not UTF-8 text" % path)
    return parse_lock(text, label=path), hashlib.sha256(data).hexdigest()


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_wheels(wheelhouse, filenames, entries, label):
    """The wheels of ``filenames`` in ``wheelhouse`` that the lock pins, each checked against
    it before anything runs: returns their names; raises LockError naming the first file whose
    sha256 is not the lock's, with both hashes. Wheels of other packages or versions are left
    out (pip, told ``--require-hashes``, installs none of them)."""
    pinned = dict(((entry["key"], entry["version"]), entry) for entry in entries)
    checked = []
    for filename in sorted(filenames):
        entry = pinned.get(wheel_key(filename) or ("", ""))
        if entry is None:
            continue
        found = sha256_file(os.path.join(wheelhouse, filename))
        expected = entry["files"].get(filename)
        if expected is not None and found != expected:
            raise LockError("wheelhouse file %s: sha256 %s, but %s has sha256 %s for that file (%s==%s); %s" % (
                os.path.join(wheelhouse, filename), found, label, expected, entry["name"], entry["version"],
                _MISMATCH_FIX))
        if expected is None and found not in entry["hashes"]:
            raise LockError("wheelhouse file %s: sha256 %s, which is none of the hashes %s has for %s==%s (%s), and "
                            "the lock names no file %s; %s" % (
                                os.path.join(wheelhouse, filename), found, label, entry["name"], entry["version"],
                                ", ".join(entry["hashes"]), filename, _MISMATCH_FIX))
        checked.append(filename)
    return checked
