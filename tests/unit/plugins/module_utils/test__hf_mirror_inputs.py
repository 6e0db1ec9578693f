"""hf_mirror's options: their checks, and the rsync destination they name."""

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils import _hf_mirror_inputs as hi
from ansible_collections.dgx_spark.glm53.tests.unit.plugins.hf_cache import REVISION


def params(**over):
    base = {"models": [{"repo_id": "org/model", "revision": REVISION}], "streams": 4, "timeout": 60,
            "bwlimit": None, "target": "spark@198.18.1.11", "dest": "~/.cache/huggingface",
            "ssh_options": list(hi.DEFAULT_SSH_OPTIONS), "force": []}
    base.update(over)
    return base


@pytest.mark.parametrize("dest, expected", [
    ("~/.cache/huggingface", ".cache/huggingface"),
    ("~/.cache/huggingface/", ".cache/huggingface"),
    ("~", ""),
    ("~/", ""),
    ("/data/hf", "/data/hf"),
    ("/data//hf/", "/data/hf"),
    ("relative/path", None),
    ("~spark/x", None),
    ("~/../etc", None),
    ("", None),
])
def test_remote_dir_makes_tilde_paths_relative_to_the_remote_home(dest, expected):
    assert hi.remote_dir(dest) == expected


def test_destination_is_the_hub_dir_remote_or_local(tmp_path, monkeypatch):
    assert hi.destination("spark@198.18.1.11", "~/.cache/huggingface") == "spark@198.18.1.11:.cache/huggingface/hub/"
    assert hi.destination("spark@198.18.1.11", "~") == "spark@198.18.1.11:hub/"
    assert hi.destination("spark@198.18.1.11", "/srv/hf") == "spark@198.18.1.11:/srv/hf/hub/"
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hi.destination("", "~/cache") == str(tmp_path / "cache" / "hub") + "/"
    assert hi.destination("", "/srv/hf/") == "/srv/hf/hub/"


def test_validate_names_every_bad_option():
    errors = hi.validate(params(
        models=[{"repo_id": "org/model", "revision": "main"}, {"repo_id": "../x", "revision": REVISION}],
        streams=17, timeout=0, bwlimit=0, target="-oProxyCommand=sh", dest="cache",
        ssh_options=["-o", ""], force=[{"repo_id": "org/model", "name": "../secret"}]))
    text = "\n".join(errors)
    for expected in ("models[0].revision (org/model) must be a full 40-hex commit sha", "models[1].repo_id",
                     "streams must be between 1 and 16, got 17", "timeout must be a positive",
                     "bwlimit must be at least 1", "target must be user@address", "dest must be an absolute path",
                     "ssh_options[1] must be a non-empty string", "force[0]: file name '../secret'"):
        assert expected in text, text
    assert hi.validate(params()) == []
    assert hi.validate(params(target="", dest="/tmp/x")) == []
    assert hi.validate(params(target="198.18.1.11")) == []


def test_link_address_is_the_host_of_the_target():
    assert hi.link_address("spark@198.18.1.11") == "198.18.1.11"
    assert hi.link_address("spark@[fd00::11]") == "fd00::11" and hi.link_address("198.18.1.11") == "198.18.1.11"
