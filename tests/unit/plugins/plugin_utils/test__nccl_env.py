"""NCCL_* names an operator gives are names NCCL documents: a near miss is refused naming the
closest documented name, an unknown one is refused with what to do if an NCCL build reads it."""

import re

import pytest

from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _nccl_env as nccl

WHERE = "tensorfold_env_overrides"


def test_the_list_is_nccl_names_each_once():
    names = nccl.DOCUMENTED + nccl.ALSO_NAMED
    assert len(names) == len(set(names))
    assert all(re.match(r"^NCCL_[A-Z0-9_]+$", name) for name in names), names
    # The ones this collection and the kit rely on, and a few from each section of the page.
    for name in ("NCCL_SOCKET_IFNAME", "NCCL_IB_HCA", "NCCL_IB_GID_INDEX", "NCCL_DEBUG", "NCCL_DEBUG_SUBSYS",
                 "NCCL_P2P_DISABLE", "NCCL_NET_GDR_LEVEL", "NCCL_MIN_NCHANNELS", "NCCL_MAX_NCHANNELS",
                 "NCCL_SYM_GIN_KERNELS_ENABLE", "NCCL_MAX_NRINGS"):
        assert name in nccl.KNOWN, name


@pytest.mark.parametrize("name", ["NCCL_DEBUG", "NCCL_IB_GID_INDEX", "NCCL_IB_TC", "NCCL_NET_GDR_LEVEL",
                                  "NCCL_IB_GDR_LEVEL", "NCCL_COMM_ID"])
def test_a_documented_name_is_accepted(name):
    assert nccl.problems([name], WHERE) == []


@pytest.mark.parametrize("typo, meant", [
    ("NCCL_IB_GID_INDX", "NCCL_IB_GID_INDEX"),
    ("NCCL_DEBUG_SUBSYSTEM", "NCCL_DEBUG_SUBSYS"),
    ("NCCL_SOCKET_IFACE", "NCCL_SOCKET_IFNAME"),
    ("NCCL_MAX_CHANNELS", "NCCL_MAX_NCHANNELS"),
])
def test_a_near_miss_is_refused_naming_the_closest_documented_name(typo, meant):
    problems = nccl.problems([typo], WHERE)
    assert len(problems) == 1
    assert problems[0].startswith("%s: %s is not an NCCL variable NCCL documents (did you mean %s" % (WHERE, typo, meant))
    assert problems[0].endswith("NCCL ignores a name it does not know, so the setting would do nothing")


def test_the_gid_index_typo_names_exactly_the_gid_index():
    assert nccl.problems({"NCCL_IB_GID_INDX": "3"}, WHERE) == [
        "tensorfold_env_overrides: NCCL_IB_GID_INDX is not an NCCL variable NCCL documents (did you mean "
        "NCCL_IB_GID_INDEX?); NCCL ignores a name it does not know, so the setting would do nothing"]


@pytest.mark.parametrize("name", ["NCCL_FROBNICATE", "NCCL_TOTALLY_MADE_UP", "NCCL_ALGORITHM", "NCCL_"])
def test_an_unknown_name_with_no_close_match_is_refused_too(name):
    assert nccl.problems([name], WHERE) == [
        "%s: %s is not an NCCL variable NCCL documents (NCCL 2.32's environment variables); if your NCCL build "
        "reads it, add it to ALSO_NAMED in plugins/plugin_utils/_nccl_env.py with where it is read" % (WHERE, name)]


def test_the_shared_prefix_alone_makes_no_match():
    # Compared whole, NCCL_FOO and NCCL_NET score 0.62, above difflib's default cutoff.
    assert nccl.closest("NCCL_FOO") == []
    assert nccl.closest("NCCL_IB_GID_INDX") == ["NCCL_IB_GID_INDEX"]


def test_names_outside_nccl_are_left_to_the_caller_and_accepted_names_pass():
    assert nccl.problems(["GLM53_TF_BATCH", "HOST", 3, "NCCL_DEBUG"], WHERE) == []
    assert nccl.problems(["NCCL_PASSTHROUGH"], WHERE, accepted=["NCCL_PASSTHROUGH"]) == []
    assert "did you mean NCCL_PASSTHROUGH?" in nccl.problems(["NCCL_PASSTROUGH"], WHERE, ["NCCL_PASSTHROUGH"])[0]


def test_problems_come_sorted_one_per_name():
    problems = nccl.problems(["NCCL_ZZZ_UNKNOWN", "NCCL_DEBUG", "NCCL_IB_GID_INDX"], "x")
    assert [p.split()[1] for p in problems] == ["NCCL_IB_GID_INDX", "NCCL_ZZZ_UNKNOWN"]
