# -*- coding: utf-8 -*-
# Copyright: dgx_spark.glm53 contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The head's API endpoint from the site values ``glm53_api_bind`` and ``glm53_api_port``:
their checks, prod.env's ``HOST`` and ``PORT``, and the URL the tensorfold role probes.
One judgment for both places that need it: playbooks/path.yml (through the site contract)
and the role (a role run on its own skips path.yml). Not a public API."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ipaddress

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils._inputs import found

BIND_VAR = "glm53_api_bind"
PORT_VAR = "glm53_api_port"
# Below 1024 a port is privileged; above 65535 there is no TCP port.
PORT_MIN, PORT_MAX = 1024, 65535

_BIND_FIX = ("fix: set %s to an address literal of the head, e.g. 127.0.0.1 (loopback, the default) or 0.0.0.0 "
             "(every address: the API has no authentication, put an authenticating proxy in front first)" % BIND_VAR)
_PORT_FIX = "fix: set %s to a whole number from %d to %d, e.g. 8000 (the default)" % (PORT_VAR, PORT_MIN, PORT_MAX)


def _address(value):
    """The address a bind value names, or None (not a string, not a literal, or zoned)."""
    if not isinstance(value, str):
        return None
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        return None
    # A zone (fe80::1%eth0) cannot go into the probe URL as it is; the kit never needs one.
    return None if getattr(address, "scope_id", None) else address


def bind_problem(value):
    """Why ``value`` is no ``glm53_api_bind``, or None: it must be an IPv4 or IPv6 address
    literal (what the engine binds to; a host name would be resolved by nobody)."""
    if _address(value) is not None:
        return None
    why = ""
    if isinstance(value, str):
        try:
            ipaddress.ip_address(value)
            why = " (an IPv6 address with a zone, which the probe URL cannot carry)"
        except ValueError:
            if value.strip() and value.strip() != value:
                why = " (spaces around the address)"
            elif ":" not in value and any(char.isalpha() for char in value):
                why = " (a host name: the engine binds to an address, not a name)"
    return "%s: expected an IPv4 or IPv6 address literal, found %s%s; %s" % (BIND_VAR, found(value), why, _BIND_FIX)


def _port(value):
    """The port as an int, or None. Text of decimal digits counts: ``-e glm53_api_port=9000``
    passes text, which Ansible's own validation turns into that number too."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit() and value.isascii():
        return int(value)
    return None


def port_problem(value):
    """Why ``value`` is no ``glm53_api_port``, or None: a whole number from 1024 to 65535.
    A bool is refused although Python counts it as an int (``true`` is no port)."""
    port = _port(value)
    if port is not None and PORT_MIN <= port <= PORT_MAX:
        return None
    why = ""
    if port is not None and port < PORT_MIN:
        why = " (below %d: a privileged port)" % PORT_MIN
    elif port is not None:
        why = " (above %d, the highest TCP port)" % PORT_MAX
    return "%s: expected a whole number from %d to %d, found %s%s; %s" % (
        PORT_VAR, PORT_MIN, PORT_MAX, found(value), why, _PORT_FIX)


def problems(bind, port):
    """Both checks, as a list of strings (empty: both values are usable)."""
    return [problem for problem in (bind_problem(bind), port_problem(port)) if problem]


def env(bind, port):
    """prod.env's ``{"HOST": ..., "PORT": ...}``; raises ValueError naming what is wrong."""
    wrong = problems(bind, port)
    if wrong:
        raise ValueError("; ".join(wrong))
    return {"HOST": str(_address(bind)), "PORT": str(_port(port))}


def probe_url(bind, port):
    """``http://host:port``, where the head reaches the API it serves: loopback for a
    wildcard bind (0.0.0.0 -> 127.0.0.1, :: -> [::1]), the bind address otherwise, IPv6 in
    brackets. Raises ValueError naming what is wrong."""
    wrong = problems(bind, port)
    if wrong:
        raise ValueError("; ".join(wrong))
    address = _address(bind)
    if address.is_unspecified:
        address = ipaddress.ip_address("::1" if address.version == 6 else "127.0.0.1")
    host = "[%s]" % address if address.version == 6 else str(address)
    return "http://%s:%d" % (host, _port(port))
