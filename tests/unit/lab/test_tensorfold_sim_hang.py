"""The lab's hang switch of the simulated TensorFold engine (lab/sim/tensorfold env.hung): an empty
switch hangs every engine while it is there; one that says "once" hangs only an engine that ran
when it was made (its mtime), never one started after it, as a real hang a restart clears."""

import os
import sys

import pytest

SRC = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))),
                   "lab", "sim", "tensorfold", "src")
sys.path.insert(0, SRC)

from tensorfold.sim import env  # noqa: E402  pylint: disable=wrong-import-position

STARTED = 1796194862.0


@pytest.fixture
def switches(tmp_path, monkeypatch):
    monkeypatch.setenv("GLM53_LAB_SWITCH_DIR", str(tmp_path))
    monkeypatch.setattr(env, "STARTED", STARTED)
    return tmp_path


def make(directory, text, mtime):
    path = directory / env.HANG
    path.write_text(text)
    os.utime(str(path), (mtime, mtime))
    return path


def test_the_switch_is_read_from_the_lab_switch_dir(switches):
    assert env.switch_dir() == str(switches)
    assert env.HANG == "lab-hang"


def test_no_switch_no_hang(switches):
    assert env.hung() is False


def test_an_empty_switch_hangs_whenever_it_was_made(switches):
    make(switches, "", STARTED - 3600)
    assert env.hung() is True
    make(switches, "", STARTED + 10)
    assert env.hung() is True


def test_a_switch_with_other_words_hangs_every_engine(switches):
    make(switches, "always\n", STARTED - 3600)
    assert env.hung() is True


def test_once_made_before_this_engine_started_does_not_hang_it(switches):
    make(switches, "once\n", STARTED - 1)
    assert env.hung() is False


def test_once_made_while_this_engine_runs_hangs_it(switches):
    make(switches, "once", STARTED + 5)
    assert env.hung() is True
    make(switches, "once", STARTED)  # made the moment it started: it ran then
    assert env.hung() is True


def test_removing_the_switch_ends_the_hang(switches):
    path = make(switches, "", STARTED + 5)
    assert env.hung() is True
    path.unlink()
    assert env.hung() is False


def test_a_directory_in_its_place_is_no_switch(switches):
    (switches / env.HANG).mkdir()
    assert env.hung() is False


def test_the_default_switch_dir_is_sessions(monkeypatch):
    monkeypatch.delenv("GLM53_LAB_SWITCH_DIR", raising=False)
    assert env.switch_dir() == "/sessions"
