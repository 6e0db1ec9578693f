#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apt_keyring
short_description: Install an apt repository's signing key after checking its pinned fingerprint
version_added: 0.1.0
description:
  - For a deb822 source's C(Signed-By), which trusts every key in the file. When O(dest) already holds exactly
    the key this module would install (one primary key with the pinned O(fingerprint) and nothing else, byte for
    byte), nothing is fetched or changed (reruns need no network).
  - Otherwise fetches O(url) on the node and reads every OpenPGP public key in it (every ASCII-armored block, or
    binary; no gpg needed). It must hold exactly one primary key, with the full fingerprint O(fingerprint); a file
    with another key, or with a second key or block besides the pinned one, is refused naming what it holds, and
    nothing is written.
  - Installs only that key's packets at O(dest) (mode 0644, atomically), replacing whatever O(dest) held; they are the
    public key with its user IDs, user attributes, subkeys and the signatures that follow each, in the publisher's
    order. Marker, trust and padding packets are dropped; a packet that does not belong in a public key (a secret
    key, data) refuses the file. Signatures are not verified here; apt's verifier uses a subkey only with a valid
    binding signature of the pinned primary key.
  - Never uses C(apt-key) or the global C(trusted.gpg) keyrings.
extends_documentation_fragment:
  - dgx_spark.glm53.attributes
author:
  - dgx_spark.glm53 maintainers (!UNKNOWN)
options:
  url:
    description: Where the key is published.
    type: str
    required: true
  dest:
    description:
      - The keyring file, for example C(/etc/apt/keyrings/docker.asc). A C(.asc) file holds the armored key, a
        C(.gpg) file the binary key, as apt reads them.
    type: path
    required: true
  fingerprint:
    description: The full fingerprint of the key's primary key (40 hex digits for v4 keys; spaces allowed).
    type: str
    required: true
  timeout:
    description: Seconds the fetch may take.
    type: int
    default: 30
attributes:
  check_mode:
    support: partial
    details: Checks an existing O(dest) the same way; does not fetch in check mode and reports a change when O(dest)
      is missing or holds anything but exactly the pinned key.
  diff_mode:
    support: none
notes:
  - Writing under C(/etc/apt/keyrings) needs root (C(become)).
  - A publisher's later additions to the pinned key (a new subkey, an extended expiry) are not picked up while
    O(dest) holds the pinned key as this module wrote it, since it does not fetch then; remove O(dest) to refresh it.
"""

EXAMPLES = r"""
- name: Docker's repository key, checked against its published fingerprint
  dgx_spark.glm53.apt_keyring:
    url: https://download.docker.com/linux/ubuntu/gpg
    dest: /etc/apt/keyrings/docker.asc
    fingerprint: 9DC8 5822 9FC7 DD38 854A  E2D8 8D81 803C 0EBF CD88
  become: true
"""

RETURN = r"""
dest:
  description: The keyring file.
  returned: always
  type: str
  sample: /etc/apt/keyrings/docker.asc
fingerprint:
  description: The pinned fingerprint, normalized.
  returned: always
  type: str
  sample: 9DC858229FC7DD38854AE2D88D81803C0EBFCD88
fingerprints:
  description: Fingerprints of the primary keys found in the installed (or fetched) key file.
  returned: success
  type: list
  elements: str
  sample: [9DC858229FC7DD38854AE2D88D81803C0EBFCD88]
fetched:
  description: Whether the key was fetched in this run.
  returned: always
  type: bool
  sample: false
"""

import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.urls import fetch_url

from ansible_collections.dgx_spark.glm53.plugins.module_utils._openpgp import (
    KeyMismatch,
    OpenPGPError,
    fingerprints,
    keyring_file,
    normalize_fingerprint,
    pinned_key,
)


def _installed(dest, pinned):
    """``(exact, found, why)`` for the file at ``dest``: whether it is byte for byte the keyring
    this module writes for the pinned key, the primary fingerprints in it, and why not."""
    try:
        with open(dest, "rb") as handle:
            data = handle.read()
    except (IOError, OSError):
        return False, [], "is missing"
    try:
        found = fingerprints(data)[0]
        wanted = keyring_file(pinned_key(data, pinned), dest.endswith(".asc"))
    except KeyMismatch as exc:
        return False, exc.found, "holds %s" % exc
    except OpenPGPError as exc:
        return False, [], "is not a usable key file (%s)" % exc
    if wanted != data:
        return False, found, "holds more than the pinned key's packets (another block, armor headers or packets)"
    return True, found, ""


def main():
    module = AnsibleModule(
        argument_spec=dict(
            url=dict(type="str", required=True),
            dest=dict(type="path", required=True),
            fingerprint=dict(type="str", required=True),
            timeout=dict(type="int", default=30),
        ),
        supports_check_mode=True,
    )
    url, dest = module.params["url"], module.params["dest"]
    pinned = normalize_fingerprint(module.params["fingerprint"])
    result = dict(changed=False, dest=dest, fingerprint=pinned, fetched=False)
    if not pinned:
        module.fail_json(msg="fingerprint must be a full key fingerprint (40 or 64 hex digits), found %r"
                             % module.params["fingerprint"], **result)
    if not dest.endswith((".asc", ".gpg")):
        module.fail_json(msg="dest must end in .asc (armored) or .gpg (binary), as apt reads keyrings; found %s" % dest, **result)

    exact, installed, why = _installed(dest, pinned)
    if exact:
        module.exit_json(fingerprints=installed, **result)
    result["changed"] = True
    if module.check_mode:
        msg = "would fetch %s and install it at %s if its fingerprint is %s" % (url, dest, pinned)
        if installed or os.path.exists(dest):
            msg += " (%s %s now)" % (dest, why)
        module.exit_json(msg=msg, fingerprints=installed, **result)

    result["changed"] = False  # until the key is written
    response, info = fetch_url(module, url, timeout=module.params["timeout"])
    if response is None or info.get("status") != 200:
        module.fail_json(msg="cannot fetch the key from %s: %s %s; check the node's network or proxy and rerun. "
                             "Nothing was changed." % (url, info.get("status"), info.get("msg")), **result)
    data = response.read()
    result["fetched"] = True
    content, mismatch, unreadable = None, None, None
    try:
        content = keyring_file(pinned_key(data, pinned), dest.endswith(".asc"))
    except KeyMismatch as exc:
        mismatch = exc
    except OpenPGPError as exc:
        unreadable = exc
    # Failures outside the except blocks: ansible-core 2.19 records an exception being handled
    # with the failure; a refused key is the message alone.
    if mismatch is not None and len(mismatch.found) == 1:
        module.fail_json(msg="the key at %s has fingerprint %s, not the pinned %s: refused, nothing was installed. "
                             "If the publisher rotated its key, check the new fingerprint on its website and update "
                             "the pin." % (url, mismatch.found[0], pinned), fingerprints=mismatch.found, **result)
    if mismatch is not None:
        module.fail_json(msg="the key file at %s holds %s; expected exactly one, the pinned %s: refused, nothing was "
                             "installed (Signed-By trusts every key in the file). Check the URL, or ask the publisher "
                             "for a file with its repository key alone." % (url, mismatch, pinned),
                         fingerprints=mismatch.found, **result)
    if unreadable is not None:
        module.fail_json(msg="%s did not return an OpenPGP public key (%s); nothing was installed." % (url, unreadable),
                         **result)

    directory = os.path.dirname(dest) or "."
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o755)
    fd, tmp = tempfile.mkstemp(prefix=".glm53-", dir=directory)
    with os.fdopen(fd, "wb") as handle:
        handle.write(content)
    module.atomic_move(tmp, dest)
    # apt reads keyrings as _apt: world-readable whatever the umask.
    os.chmod(dest, 0o644)
    result["changed"] = True
    module.exit_json(fingerprints=[pinned], **result)


if __name__ == "__main__":
    main()
