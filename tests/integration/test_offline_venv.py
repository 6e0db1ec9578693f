"""offline_venv end to end on a lab node, which is Debian 12 without python3-venv: its
python3 has no ensurepip, and the deploy user `spark` has no sudo to install it. So the
module must fall back to ``venv --without-pip`` and pip run from its wheel, install the
hf_weights set offline from a wheelhouse built on the controller and copied over, do
nothing on a rerun, and put back a package removed from the environment. What users see
is read on the node as `spark` with plain commands."""

from __future__ import annotations

import lab_faults
from lab_faults import HEAD

from ansible_collections.dgx_spark.glm53.tests.unit.plugins import wheelhouse

PLAYBOOK = "tests/integration/playbooks/offline_venv.yml"
DIR = "/home/spark/glm53-offline-venv-test"
VENV = DIR + "/hf-venv"
MAKE = "Make the environment"
IMPORT = "Import the client with the interpreter the module returned"


def as_spark(script: str, check: bool = True):
    return lab_faults.sh(HEAD, script, user="spark", check=check)


def test_a_node_without_ensurepip_gets_a_venv_without_pip(run_playbook):
    # The premise, as the deploy user sees it.
    facts = as_spark("python3 -c 'import sys, platform; print(\"%d.%d\" % sys.version_info[:2], platform.machine())';"
                     " python3 -c 'import ensurepip' 2>/dev/null && echo has-ensurepip || echo no-ensurepip;"
                     " sudo -n true 2>/dev/null && echo has-sudo || echo no-sudo").stdout.split()
    version, machine, ensurepip, sudo = facts
    assert (ensurepip, sudo) == ("no-ensurepip", "no-sudo"), facts
    requirements, pip_version = wheelhouse.hf_requirements()
    extravars = {"offline_venv_wheelhouse": wheelhouse.build(machine, version, requirements, pip_version),
                 "offline_venv_dir": DIR}
    lab_faults.sh(HEAD, "rm -rf " + DIR)
    try:
        first = run_playbook(PLAYBOOK, extravars=extravars, ident="offline_venv-first")
        made = first.task_results(MAKE)[HEAD]
        assert made["changed"] is True and made["method"] == "venv-without-pip", made
        assert made["msg"] == ("created %s with venv-without-pip (no environment yet): 15 pinned packages installed "
                               "offline from %s/wheelhouse; /usr/bin/python3 has no ensurepip (on Debian/Ubuntu it "
                               "comes with python3-venv, which needs root)" % (VENV, DIR)), made["msg"]
        assert made["python"] == VENV + "/bin/python" and made["pythonpath"] == ""
        assert made["installed"]["huggingface_hub"] == "2.4.0" and made["installed"]["hf-xet"] == "1.8.0"
        assert len(made["commands"]) == 2, made["commands"]
        assert made["commands"][0] == "/usr/bin/python3 -m venv --clear --without-pip " + VENV
        assert made["commands"][1].startswith("%s/bin/python %s/wheelhouse/pip-%s-py3-none-any.whl/pip install "
                                              "--no-index" % (VENV, DIR, pip_version))
        assert first.task_results(IMPORT)[HEAD]["stdout"] == "2.4.0 " + VENV

        # The wheelhouse is on the node now: the reruns are about offline_venv, not copy.
        extravars = dict(extravars, offline_venv_copy=False)
        second = run_playbook(PLAYBOOK, extravars=extravars, ident="offline_venv-again")
        assert second.changed_total == 0, second.stats
        again = second.task_results(MAKE)[HEAD]
        assert again["changed"] is False and again["method"] == "venv-without-pip" and again["commands"] == []

        # What spark has, read with plain commands: the client imports, the venv has no pip
        # of its own, and everything belongs to spark.
        seen = as_spark("%s/bin/python -c 'import huggingface_hub; print(huggingface_hub.__version__)';"
                        " ls %s/bin; find %s ! -user spark | wc -l" % (VENV, VENV, DIR)).stdout.split()
        assert seen[0] == "2.4.0" and seen[-1] == "0", seen
        assert not [name for name in seen[1:-1] if name.startswith("pip")], seen

        # A package removed from the environment is put back, with pip from the wheel again.
        as_spark("rm -r %s/lib/python%s/site-packages/tqdm %s/lib/python%s/site-packages/tqdm-*.dist-info"
                 % (VENV, version, VENV, version))
        assert as_spark("%s/bin/python -c 'import tqdm'" % VENV, check=False).returncode != 0
        third = run_playbook(PLAYBOOK, extravars=extravars, ident="offline_venv-repair")
        repaired = third.task_results(MAKE)[HEAD]
        assert repaired["changed"] is True and repaired["msg"].startswith(
            "repaired %s with venv-without-pip (tqdm: missing)" % VENV), repaired["msg"]
        assert as_spark("%s/bin/python -c 'import tqdm; print(tqdm.__version__)'" % VENV).stdout.strip() == "4.70.1"
    finally:
        lab_faults.sh(HEAD, "rm -rf " + DIR)
