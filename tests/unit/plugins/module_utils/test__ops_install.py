"""ops_install's node side on a real directory: the program and the plan replaced only when
their bytes or modes differ, never half written, nothing written in check mode."""

import hashlib
import os
import stat

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils._ops_install import (
    InstallError,
    install_program,
    program_state,
    record_plan,
)

PROGRAM = b"#!/usr/bin/env python3\nprint('glm53-ops')\n"
SHA = hashlib.sha256(PROGRAM).hexdigest()


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def sent(tmp_path):
    src = tmp_path / "sent" / "glm53-ops"
    src.parent.mkdir()
    src.write_bytes(PROGRAM)
    return str(src)


def test_a_missing_program_is_installed_once_then_left_alone(tmp_path, sent):
    install_dir = str(tmp_path / "lib" / "glm53-ops")
    assert program_state(install_dir, SHA)["current"] is False
    assert install_program(install_dir, SHA, sent) is True
    path = os.path.join(install_dir, "glm53-ops")
    assert open(path, "rb").read() == PROGRAM and mode(path) == 0o755 and mode(install_dir) == 0o755
    assert program_state(install_dir, SHA) == {"path": path, "sha256": SHA, "current": True}
    assert install_program(install_dir, SHA, None) is False
    # No temporary file is left beside it.
    assert os.listdir(install_dir) == ["glm53-ops"]


def test_other_bytes_are_replaced_and_only_the_mode_is_fixed_when_the_bytes_agree(tmp_path, sent):
    install_dir = tmp_path / "lib"
    install_dir.mkdir()
    path = install_dir / "glm53-ops"
    path.write_bytes(b"old")
    assert install_program(str(install_dir), SHA, sent) is True and path.read_bytes() == PROGRAM
    path.chmod(0o700)
    # The right bytes: no source needed, only the mode.
    assert install_program(str(install_dir), SHA, None) is True and mode(str(path)) == 0o755


def test_check_mode_writes_nothing(tmp_path, sent):
    install_dir = str(tmp_path / "lib")
    assert install_program(install_dir, SHA, sent, check_mode=True) is True
    assert not os.path.exists(install_dir)
    config_dir = str(tmp_path / "config")
    assert record_plan(config_dir, "{}\n", check_mode=True) is True
    assert not os.path.exists(config_dir)


def test_a_copy_cut_short_is_refused_and_the_installed_program_is_kept(tmp_path, sent):
    install_dir = tmp_path / "lib"
    install_dir.mkdir()
    (install_dir / "glm53-ops").write_bytes(b"old")
    with open(sent, "wb") as out:
        out.write(PROGRAM[:10])
    with pytest.raises(InstallError) as raised:
        install_program(str(install_dir), SHA, sent)
    assert "expected %s" % SHA in str(raised.value) and "rerun" in str(raised.value)
    assert (install_dir / "glm53-ops").read_bytes() == b"old"


def test_the_plan_is_written_private_and_rewritten_only_when_it_differs(tmp_path):
    config_dir = str(tmp_path / "config")
    path = os.path.join(config_dir, "ops.json")
    assert record_plan(config_dir, '{"path": "vllm"}\n') is True
    assert open(path).read() == '{"path": "vllm"}\n' and mode(path) == 0o600 and mode(config_dir) == 0o700
    assert record_plan(config_dir, '{"path": "vllm"}\n') is False
    os.chmod(config_dir, 0o755)
    assert record_plan(config_dir, '{"path": "vllm"}\n') is True and mode(config_dir) == 0o700
    assert record_plan(config_dir, '{"path": "tensorfold"}\n') is True and open(path).read() == '{"path": "tensorfold"}\n'


def test_a_file_where_the_directory_goes_names_it_and_the_fix(tmp_path):
    (tmp_path / "config").write_text("")
    with pytest.raises(InstallError) as raised:
        record_plan(str(tmp_path / "config"), "{}\n")
    assert "is not a directory" in str(raised.value) and "move it away" in str(raised.value)
