"""roles/hf_weights: Ansible's async limit (a bare SIGKILL of the module's process group) comes
after the module's own deadline and after the wait gives up, never with them. The task
files' own expressions are rendered with the role's own defaults and vars."""

import os

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

ROLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                    "roles", "hf_weights")


def load(*parts):
    with open(os.path.join(ROLE, *parts)) as handle:
        return yaml.safe_load(handle)


def trusted(value):
    """The role's strings as Ansible trusts a role's own files: as templates."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return dict((key, trusted(item)) for key, item in value.items())
    if isinstance(value, list):
        return [trusted(item) for item in value]
    return value


def task(tasks_file, name):
    return [t for t in load("tasks", tasks_file) if t["name"] == name][0]


@pytest.fixture(name="render")
def fixture_render():
    variables = trusted(dict(load("defaults", "main.yml"), **load("vars", "main.yml")))

    def render(expression, **extra):
        return int(Templar(loader=DataLoader(), variables=dict(variables, **extra)).template(trusted(expression)))
    return render


@pytest.mark.parametrize("timeout", [14400, 60])
def test_the_mirror_fails_at_its_own_timeout_before_the_sigkill_and_the_wait_outlasts_both(render, timeout):
    start = task("mirror.yml", "Start the copies from the head")
    wait = task("mirror.yml", "Wait for the copies")
    own = render(start["dgx_spark.glm53.hf_mirror"]["timeout"], hf_weights_timeout=timeout)
    limit = render(start["async"], hf_weights_timeout=timeout)
    assert own == timeout
    assert limit >= own + 60, (limit, own)
    assert render(wait["dgx_spark.glm53.async_progress"]["timeout"], hf_weights_timeout=timeout) >= limit


@pytest.mark.parametrize("timeout", [14400, 60])
def test_the_download_wait_gives_up_before_the_sigkill(render, timeout):
    start = task("fetch.yml", "Start the downloads")
    wait = task("fetch.yml", "Wait for the downloads")
    limit = render(start["async"], hf_weights_timeout=timeout)
    assert limit >= render(wait["dgx_spark.glm53.async_progress"]["timeout"], hf_weights_timeout=timeout) + 60
