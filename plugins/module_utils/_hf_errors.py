# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""Private helpers of hf_snapshot: what huggingface_hub's exceptions mean, as one line for the
operator naming the input to fix, and whether the rest of a fetch is worth trying. Pure: they
read the exception (its class names, cause chain, HTTP status), nothing else. Not a public API.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno

# Exception class names (anywhere in the MRO) that mean the hub gave a definite answer: every
# other file would get the same, so the remaining fetches are cancelled.
_DEFINITE = ("RepositoryNotFoundError", "RevisionNotFoundError", "GatedRepoError", "DisabledRepoError",
             "OfflineModeIsEnabled", "RemoteEntryNotFoundError")
# A local file system error while fetching: the cache, not the network.
SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
CACHE_ERRNOS = SPACE_ERRNOS + (errno.EACCES, errno.EPERM, errno.EROFS)
_TRANSIENT = ("LocalEntryNotFoundError", "TransportError", "TimeoutException", "NetworkError", "ConnectError",
              "RemoteProtocolError", "ReadError", "XetDownloadError", "ConnectionError", "TimeoutError")


def _kinds(exc):
    return set(cls.__name__ for cls in type(exc).__mro__)


def is_definite(exc):
    """The hub's answer would be the same for every file (or the cache cannot be written): stop fetching."""
    return bool(_kinds(exc) & set(_DEFINITE)) or getattr(exc, "errno", None) in CACHE_ERRNOS


def _first_line(text):
    lines = [line.strip() for line in str(text).splitlines() if line.strip()]
    return lines[0] if lines else ""


def _cause(exc, timeout=None):
    """The lowest cause the client wrapped, in one line; a timeout names the setting."""
    chain = [exc]
    while getattr(chain[-1], "__cause__", None) is not None:
        chain.append(chain[-1].__cause__)
    text = "%s: %s" % (type(chain[-1]).__name__, _first_line(chain[-1]) or "no detail")
    if timeout and any("Timeout" in kind for item in chain for kind in _kinds(item)):
        text += "; no answer within the timeout of %s s" % timeout
    return text


def scrub(text, token):
    """The text with the token masked (a client message could quote a header)."""
    return text.replace(token, "********") if token else text


def hub_error_message(exc, repo_id, revision, endpoint, token_given, filename=None, timeout=None):
    """One line for the operator about a client exception, naming the input to fix."""
    kinds = _kinds(exc)
    status = getattr(getattr(exc, "response", None), "status_code", None)
    where = "%r at revision %r (endpoint %s)" % (repo_id, revision, endpoint)
    if "GatedRepoError" in kinds:
        if token_given:
            return ("%r is gated and the token given has no access to it (HTTP %s): accept its terms on the hub "
                    "with the account of that token (hf_weights_token)" % (repo_id, status))
        return "%r is gated: accept its terms on the hub and pass a token (hf_weights_token)" % (repo_id,)
    if "RepositoryNotFoundError" in kinds:
        fix = "check hf_weights repo_id"
        if not token_given:
            fix += " (a private repo also needs a token: hf_weights_token)"
        return "the hub answered RepoNotFound for %s: %s" % (where, fix)
    if "RevisionNotFoundError" in kinds:
        return "the hub answered RevisionNotFound for %s: check hf_weights revision (a commit of that repo)" % where
    if "RemoteEntryNotFoundError" in kinds:
        return ("the hub has no file %r in %s although it listed it: rerun, or check the pinned revision"
                % (filename, where))
    if "DisabledRepoError" in kinds:
        return "the hub answered that %r is disabled (endpoint %s)" % (repo_id, endpoint)
    if "OfflineModeIsEnabled" in kinds:
        return ("HF_HUB_OFFLINE is set in the task's environment, so huggingface_hub makes no network call: unset it, "
                "or use offline: true with a snapshot and manifest copied from the head")
    if status in (401, 403):
        return "the hub refused the request for %s with HTTP %s: check hf_weights_token" % (where, status)
    if filename:
        subject = "fetching %r of %s@%s from %s" % (filename, repo_id, revision, endpoint)
    else:
        subject = "listing the files of %s" % where
    if status is not None and not (kinds & set(_TRANSIENT)) and status < 500 and status not in (408, 429):
        return "%s failed: the hub answered HTTP %s (%s)" % (subject, status, _first_line(exc))
    if not filename:
        return "%s failed (%s): check the endpoint and the network, then rerun" % (subject, _cause(exc, timeout))
    return ("%s was interrupted (%s): rerun to resume: the files already fetched are kept (huggingface_hub "
            "starts an interrupted file over)" % (subject, _cause(exc, timeout)))
