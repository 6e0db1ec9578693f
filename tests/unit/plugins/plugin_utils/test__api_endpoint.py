"""The head's API endpoint from glm53_api_bind and glm53_api_port: what each accepts, the
errors (variable, expected, found, fix), prod.env's HOST and PORT, and the URL the role probes."""

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.glm53.plugins.filter import tensorfold as tf_filter
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _api_endpoint as api


@pytest.mark.parametrize("bind", ["127.0.0.1", "0.0.0.0", "10.0.0.5", "::", "::1", "2001:db8::5"])
def test_ipv4_and_ipv6_literals_are_good_binds(bind):
    assert api.bind_problem(bind) is None


@pytest.mark.parametrize("bind, why", [
    ("spark-head", 'found str "spark-head" (a host name: the engine binds to an address, not a name)'),
    ("localhost", 'found str "localhost" (a host name'),
    ("10.0.0.300", 'found str "10.0.0.300"; fix'),
    (" 127.0.0.1", 'found str " 127.0.0.1" (spaces around the address)'),
    ("fe80::1%enp1s0f1np1", "(an IPv6 address with a zone, which the probe URL cannot carry)"),
    ("", 'found str ""; fix'),
    (127, "found int 127; fix"),
    (["127.0.0.1"], 'found list ["127.0.0.1"]; fix'),
    (None, "found null; fix"),
])
def test_a_bind_that_is_no_address_literal_is_refused_naming_variable_found_and_fix(bind, why):
    problem = api.bind_problem(bind)
    assert problem.startswith("glm53_api_bind: expected an IPv4 or IPv6 address literal, found "), problem
    assert why in problem
    assert problem.endswith("; fix: set glm53_api_bind to an address literal of the head, e.g. 127.0.0.1 (loopback, "
                            "the default) or 0.0.0.0 (every address: the API has no authentication, put an "
                            "authenticating proxy in front first)")


@pytest.mark.parametrize("port", [1024, 8000, 65535, "9000"])
def test_ports_from_1024_to_65535_are_good_text_of_digits_too(port):
    # -e glm53_api_port=9000 gives text; Ansible's own validation reads it as the number too.
    assert api.port_problem(port) is None


@pytest.mark.parametrize("port, found", [
    (True, "bool true"),
    (False, "bool false"),
    (80, "int 80 (below 1024: a privileged port)"),
    (65536, "int 65536 (above 65535, the highest TCP port)"),
    (0, "int 0 (below 1024: a privileged port)"),
    (-8000, "int -8000 (below 1024: a privileged port)"),
    (8000.0, "float 8000.0"),
    (8000.5, "float 8000.5"),
    ("8000a", 'str "8000a"'),
    ("", 'str ""'),
    (" 8000", 'str " 8000"'),
    (None, "null"),
])
def test_a_port_that_is_no_whole_number_in_range_is_refused(port, found):
    assert api.port_problem(port) == (
        "glm53_api_port: expected a whole number from 1024 to 65535, found %s; fix: set glm53_api_port to a whole "
        "number from 1024 to 65535, e.g. 8000 (the default)" % found)


def test_both_problems_are_reported_together():
    assert api.problems("127.0.0.1", 8000) == []
    assert [p.partition(":")[0] for p in api.problems("spark-head", True)] == ["glm53_api_bind", "glm53_api_port"]


def test_host_and_port_for_prod_env():
    assert api.env("127.0.0.1", 8000) == {"HOST": "127.0.0.1", "PORT": "8000"}
    assert api.env("::", "9000") == {"HOST": "::", "PORT": "9000"}
    # The canonical spelling: what the engine gets is the address the check accepted.
    assert api.env("2001:DB8:0::5", 8000) == {"HOST": "2001:db8::5", "PORT": "8000"}
    with pytest.raises(ValueError, match="^glm53_api_port: expected a whole number"):
        api.env("127.0.0.1", True)


@pytest.mark.parametrize("bind, port, url", [
    ("0.0.0.0", 8000, "http://127.0.0.1:8000"),
    ("::", 8000, "http://[::1]:8000"),
    ("10.0.0.5", 8000, "http://10.0.0.5:8000"),
    ("127.0.0.1", "9000", "http://127.0.0.1:9000"),
    ("::1", 8001, "http://[::1]:8001"),
    ("2001:db8::5", 8000, "http://[2001:db8::5]:8000"),
])
def test_the_probe_url_is_where_the_head_reaches_its_api(bind, port, url):
    assert api.probe_url(bind, port) == url
    assert tf_filter.tensorfold_api_url(bind, port) == url


def test_the_probe_url_filter_refuses_what_the_checks_refuse():
    with pytest.raises(ValueError, match="glm53_api_bind: expected"):
        api.probe_url("spark-head", 8000)
    with pytest.raises(AnsibleFilterError, match=r"^tensorfold_api_url: glm53_api_port: expected a whole number .*"
                                                 r"found int 80 \(below 1024"):
        tf_filter.tensorfold_api_url("127.0.0.1", 80)
