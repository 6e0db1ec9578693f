"""The kit's config/prod.env rendered from the profile's prod-c8.env.example: what serve.sh
gets when it runs ``set -a; source config/prod.env`` (checked by sourcing the files with bash,
not with the parser under test), the operator's overrides and the errors they see."""

import os
import re
import subprocess

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.dgx_spark.glm53.plugins.filter import tensorfold as tf_filter
from ansible_collections.dgx_spark.glm53.plugins.plugin_utils import _tf_env as tf

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", "..", ".."))
EXAMPLE_PATH = os.path.join(ROOT, "tests", "unit", "fixtures", "tensorfold", "prod-c8.env.example")
with open(EXAMPLE_PATH) as handle:
    EXAMPLE = handle.read()

MODEL = ("/root/.cache/huggingface/hub/models--brandonmusic--GLM-5.3-Flash-tr3-4bpw/snapshots/"
         "5ab363a8dcf6405955fd5f99671e01a1c9fb124b")
DRAFTER = ("/root/.cache/huggingface/hub/models--incoai--GLM-5.3-Flash-DFlash2/snapshots/"
           "7d74cdd881ed7e32c31175984a67823127b66cfe")
SITE = {
    "WORKER_SSH": "spark@192.168.100.11",
    "HEAD_IP": "192.168.100.10",
    "HEAD_HF": "/home/spark/.cache/huggingface",
    "WORKER_HF": "/srv/hf cache/huggingface",
    "NCCL_SOCKET_IFNAME": "enP2p1s0f1np1",
    "NCCL_IB_HCA": "roceP2p1s0f1,rocep1s0f1",
    "MODEL_PATH": MODEL,
    "DRAFTER": DRAFTER,
    "IMAGE": "glm53-tensorfold:lp9001",
}


def contract(workers=("spark-b",), master_port=29551, worker_env=None):
    env = {"NCCL_SOCKET_IFNAME": "enp1s0f1np1", "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1",
           "GLOO_SOCKET_IFNAME": "enp1s0f1np1"}
    nodes = {"spark-a": {"rank": 0, "role": "head", "link_address": "10.10.0.1", "netdev": "enp1s0f1np1",
                         "env": dict(env)}}
    for rank, name in enumerate(workers, 1):
        nodes[name] = {"rank": rank, "role": "worker", "link_address": "10.10.0.%d" % (rank + 1),
                       "netdev": "enp1s0f1np1", "env": dict(worker_env or env)}
    return {"schema": 1, "path": "tensorfold", "head": "spark-a", "workers": list(workers),
            "master_address": "10.10.0.1", "master_port": master_port, "ssh_user": "spark", "nodes": nodes}


WEIGHTS = {"model_path": MODEL, "drafter_path": DRAFTER}
HEAD_FACTS = {"hf_cache_dir": "/home/spark/.cache/huggingface", "model_path": MODEL}
WORKER_FACTS = {"hf_cache_dir": "/data/hf", "model_path": MODEL}


def bash_source(text, tmp_path):
    """What `set -a; source FILE` exports, read back from `env` in a clean bash."""
    def exported(path):
        out = subprocess.run(["env", "-i", "bash", "--norc", "--noprofile", "-c",
                              'set -a; . "$1"; set +a; env -0', "bash", path],
                             check=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE).stdout
        pairs = [item.split(b"=", 1) for item in out.split(b"\0") if item]
        return dict((key.decode(), value.decode()) for key, value in pairs)

    empty = tmp_path / "empty.env"
    empty.write_text("")
    path = tmp_path / "sourced.env"
    path.write_text(text)
    baseline = exported(str(empty))
    return dict((key, value) for key, value in exported(str(path)).items()
                if key != "_" and baseline.get(key) != value)


def assignments(text, key):
    return re.findall(r"^%s=.*$" % key, text, flags=re.M)


def test_the_fixture_parses_the_way_bash_sources_it(tmp_path):
    entries = tf.parse_env(EXAMPLE)
    assert tf.effective(entries) == bash_source(EXAMPLE, tmp_path)
    pieces = [entry["value"] for entry in entries if entry.get("key") == "GLM53_TF_BATCH_PIECE"]
    assert pieces == ["2048", "4096"]
    assert len(tf.effective(entries)) == 82


def test_the_duplicated_key_appears_once_with_the_value_in_force(tmp_path):
    text = tf.render_env(EXAMPLE, SITE, {}, "generated for a test")
    assert assignments(text, "GLM53_TF_BATCH_PIECE") == ["GLM53_TF_BATCH_PIECE=4096"]
    assert bash_source(text, tmp_path)["GLM53_TF_BATCH_PIECE"] == "4096"
    # It stays in the C8 section whose comment explains it; the batching section says so.
    c8_section = text.split("LimeChain C8 additions")[1]
    assert "GLM53_TF_BATCH_PIECE=4096" in c8_section
    assert "# GLM53_TF_BATCH_PIECE: set once further down (the value in force)." in text


def test_every_shipped_value_is_unchanged_except_the_site_keys(tmp_path):
    shipped = bash_source(EXAMPLE, tmp_path)
    rendered = bash_source(tf.render_env(EXAMPLE, SITE, {}, "generated for a test"), tmp_path)
    assert set(rendered) == set(shipped)
    for key, value in shipped.items():
        assert rendered[key] == SITE.get(key, value), key
    assert shipped["WORKER_SSH"] == "<worker-ssh>" and rendered["WORKER_SSH"] == "spark@192.168.100.11"
    assert rendered["WORKER_HF"] == "/srv/hf cache/huggingface"
    assert rendered["HOST"] == "127.0.0.1" and rendered["PORT"] == "8000"


def test_the_example_explains_itself_and_the_header_comes_first(tmp_path):
    text = tf.render_env(EXAMPLE, SITE, {}, "Generated by dgx_spark.glm53\nDo not edit.")
    assert text.startswith("# Generated by dgx_spark.glm53\n# Do not edit.\n")
    for line in EXAMPLE.splitlines():
        if line.startswith("#"):
            assert line in text.splitlines()
    # Untouched assignments keep their line byte for byte, quoting and comments included.
    assert 'WARMUP_LENGTHS="4096 16384"' in text.splitlines()
    assert "GLM53_TF_SESSION_GIB=2           # RAM store" in text.splitlines()
    assert text.endswith("GLM53_TF_STATS=summary\n")


def test_overrides_are_applied_and_marked(tmp_path):
    overrides = {"GLM53_TF_BATCH": 4, "GLM53_TF_VISION": True, "GLM53_TF_MULTI_PREFILL": False,
                 "GLM53_TF_BATCH_ADMIT_GB": 0.5, "CONTEXT": 262144, "MAX_TOKENS": 8192,
                 "GLM53_TF_HEALTH": "strict", "START_ATTEMPTS": 2, "GLM53_TF_BATCH_PIECE": 8192}
    assert tf.check_overrides(overrides, tf.all_known_keys(tf.parse_env(EXAMPLE))) == []
    text = tf.render_env(EXAMPLE, SITE, overrides, "generated for a test")
    got = bash_source(text, tmp_path)
    assert got["GLM53_TF_BATCH"] == "4"
    assert got["GLM53_TF_VISION"] == "1" and got["GLM53_TF_MULTI_PREFILL"] == "0"
    assert got["GLM53_TF_BATCH_ADMIT_GB"] == "0.5"
    assert got["CONTEXT"] == "262144" and got["MAX_TOKENS"] == "8192"
    assert got["GLM53_TF_HEALTH"] == "strict" and got["START_ATTEMPTS"] == "2"
    assert assignments(text, "GLM53_TF_BATCH_PIECE") == ["GLM53_TF_BATCH_PIECE=8192"]
    assert "# GLM53_TF_BATCH: overridden by tensorfold_env_overrides (shipped: 8)" in text
    assert "# CONTEXT: overridden by tensorfold_env_overrides (shipped: 1048576)" in text
    shipped = bash_source(EXAMPLE, tmp_path)
    for key in set(shipped) - set(overrides) - set(SITE):
        assert got[key] == shipped[key], key


def test_drafter_empty_means_mtp_drafts_only(tmp_path):
    text = tf.render_env(EXAMPLE, dict(SITE, DRAFTER=""), {}, "generated for a test")
    assert assignments(text, "DRAFTER") == ["DRAFTER="]
    got = bash_source(text, tmp_path)
    assert "DRAFTER" in got and got["DRAFTER"] == ""


AWKWARD = {
    "EXTRA_ARGS": "--flag 'quoted value' \"double\" $HOME `uname` $(id) \\back\\slash",
    "WATCH_ALERT": "/usr/local/bin/notify --to ops@example.org; echo done & true | cat",
    "SERVED_NAME": "glm 5.3 # not a comment",
    "GLM53_TF_EXTRA_STOP": "<|assistant|>",
    "HEAD_SESSIONS": "~/sessions",
    "WORKER_SESSIONS": "/data/a:~/b",
    "PATCHES": "0150 0600\t0630",
    "CANARY": "it's \"ok\"",
    "LOG_MAX_SIZE": "200m",
    "GLM53_TF_CPU_PIN": "*",
    "GLM53_TF_TOOL_FIXES": "caf\u00e9 \u2713",
    "GLM53_TF_STALL_S": "-1",
    "WATCH_MIN_TPR": "'",
    "GLM53_TF_HEALTH": "a=b",
}


def test_awkward_values_round_trip_through_bash(tmp_path):
    assert tf.check_overrides(AWKWARD, tf.all_known_keys(tf.parse_env(EXAMPLE))) == []
    text = tf.render_env(EXAMPLE, SITE, AWKWARD, "generated for a test")
    wanted = tf.intended(EXAMPLE, SITE, AWKWARD)
    assert bash_source(text, tmp_path) == wanted
    assert tf.effective(tf.parse_env(text)) == wanted
    for key, value in AWKWARD.items():
        assert wanted[key] == value


def test_the_parser_reads_every_quoting_form_like_bash(tmp_path):
    text = "\n".join([
        "# comment", "", "   # indented comment",
        "BARE=plain-value_1.2:3,4/5@6%7+8",
        'DOUBLE="two words"  # trailing',
        "SINGLE='$not expanded \"here\"'",
        'ESCAPED="a \\"b\\" \\$c \\\\ \\n"',
        "MIXED=a'b c'\"d e\"f",
        "BACKSLASH=a\\ b\\#c",
        "HASH=a#b",
        "EMPTY=",
        "EMPTY_QUOTED=''",
        "export EXPORTED=yes",
        "  INDENTED=1",
        "TILDE_INSIDE=a~b",
        "DUP=1", "DUP=2",
    ]) + "\n"
    entries = tf.parse_env(text)
    assert tf.effective(entries) == bash_source(text, tmp_path)
    assert [entry["type"] for entry in entries[:3]] == ["comment", "blank", "comment"]
    assert entries[4]["comment"] == "# trailing"
    assert [entry["value"] for entry in entries if entry.get("key") == "DUP"] == ["1", "2"]


@pytest.mark.parametrize("line, reason", [
    ("HOME_HF=$HOME/.cache", "expands at run time"),
    ('CMD="$(id)"', "expands at run time"),
    ("TILDE=~/x", "unquoted ~"),
    ("A=b c", "would run as a command"),
    ("A='open", "unterminated single quote"),
    ("A=b; rm -rf /", "shell syntax"),
    ("echo hi", "not a KEY=value assignment"),
])
def test_lines_source_cannot_read_statically_are_refused(line, reason):
    with pytest.raises(tf.EnvSyntaxError, match="^line 2: .*" + reason):
        tf.parse_env("A=1\n" + line + "\n")


def known():
    return tf.all_known_keys(tf.parse_env(EXAMPLE))


def test_an_unknown_key_fails_with_the_closest_known_name():
    assert tf.check_overrides({"GLM53_TF_BACH": 4}, known()) == [
        "tensorfold_env_overrides: unknown key 'GLM53_TF_BACH' (did you mean GLM53_TF_BATCH?)"]
    assert tf.check_overrides({"MEM_GATE_GB": 90}, known()) == [
        "tensorfold_env_overrides: unknown key 'MEM_GATE_GB' (did you mean MEM_GATE_GIB?)"]
    assert tf.check_overrides({"CANNARY": "strict"}, known()) == [
        "tensorfold_env_overrides: unknown key 'CANNARY' (did you mean CANARY?)"]
    assert tf.check_overrides({"FROBNICATE": 1}, known()) == [
        "tensorfold_env_overrides: unknown key 'FROBNICATE' (neither in prod-c8.env.example nor read by "
        "serve.sh; engine knobs start with GLM53_TF_)"]


def test_new_engine_knobs_pass_unless_they_look_like_a_typo():
    assert tf.check_overrides({"GLM53_TF_SOMETHING_NEW": 1, "NCCL_DEBUG": "INFO", "GLM53_TF_STALL_S": 600,
                               "NCCL_MIN_NCHANNELS": 4}, known()) == []
    assert tf.check_overrides({"GLM53_TF_VISON": 1}, known()) == [
        "tensorfold_env_overrides: unknown key 'GLM53_TF_VISON' (did you mean GLM53_TF_VISION?)"]
    # A real new knob that close to a known one is accepted once the caller knows it.
    assert tf.check_overrides({"GLM53_TF_VISON": 1}, known() + ["GLM53_TF_VISON"]) == []


@pytest.mark.parametrize("key, change", [
    ("WORKER_SSH", "glm53_link_address"), ("HEAD_IP", "glm53_link_address"),
    ("NCCL_SOCKET_IFNAME", "glm53_link_netdev"), ("NCCL_IB_HCA", "glm53_link_second_netdev"),
    ("MASTER_PORT", "cx7_link_master_port_tensorfold"), ("HEAD_HF", "glm53_hf_cache_dir"),
    ("WORKER_HF", "glm53_hf_cache_dir"), ("MODEL_PATH", "hf_weights"), ("DRAFTER", "hf_weights"),
    ("IMAGE", "tensorfold_image"), ("HOST", "glm53_api_bind"), ("PORT", "glm53_api_port"),
    ("NAME", "glm53-tf-r0 and glm53-tf-r1"), ("STATE_DIR", "tensorfold_kit_state_dir"),
])
def test_site_keys_cannot_be_overridden(key, change):
    errors = tf.check_overrides({key: "x"}, known())
    assert len(errors) == 1
    assert errors[0].startswith("tensorfold_env_overrides: %s is supplied by the site and cannot be overridden; "
                                "it comes from " % key)
    assert change in errors[0]


def test_host_and_port_in_the_overrides_point_to_the_site_values():
    # One setting, specified once: before, PORT here moved the engine and the role's probe separately.
    assert tf_filter.tensorfold_env_errors({"HOST": "0.0.0.0", "PORT": 9000}, EXAMPLE) == [
        "tensorfold_env_overrides: HOST is supplied by the site and cannot be overridden; it comes from the site "
        "values: set glm53_api_bind (an address of the head; non-loopback exposes the API, which has no "
        "authentication)",
        "tensorfold_env_overrides: PORT is supplied by the site and cannot be overridden; it comes from the site "
        "values: set glm53_api_port (the role probes the API there)"]


def test_nccl_keys_must_be_names_nccl_documents():
    assert tf.check_overrides({"NCCL_IB_GID_INDX": 3}, known()) == [
        "tensorfold_env_overrides: NCCL_IB_GID_INDX is not an NCCL variable NCCL documents (did you mean "
        "NCCL_IB_GID_INDEX?); NCCL ignores a name it does not know, so the setting would do nothing"]
    assert tf_filter.tensorfold_env_errors({"NCCL_NOT_A_THING": 1}, EXAMPLE) == [
        "tensorfold_env_overrides: NCCL_NOT_A_THING is not an NCCL variable NCCL documents (NCCL 2.32's environment "
        "variables); if your NCCL build reads it, add it to ALSO_NAMED in plugins/plugin_utils/_nccl_env.py with "
        "where it is read"]
    # Documented names pass although one is two edits from a known key (NCCL_IB_TC, NCCL_IB_HCA), and so does
    # serve.sh's own NCCL_PASSTHROUGH; the site's NCCL keys stay the site's.
    assert tf.check_overrides({"NCCL_IB_TC": 106, "NCCL_DEBUG": "INFO", "NCCL_IB_GID_INDEX": 3,
                               "NCCL_PASSTHROUGH": 1}, known()) == []
    assert "NCCL_IB_HCA is supplied by the site" in tf.check_overrides({"NCCL_IB_HCA": "x"}, known())[0]


def test_run_time_variables_of_serve_sh_are_refused():
    assert tf.check_overrides({"GLM53_TF_LOCKED": 1}, known()) == [
        "tensorfold_env_overrides: GLM53_TF_LOCKED is set by serve.sh itself at run time; it cannot be configured"]


def test_values_must_be_scalars_on_one_line():
    errors = tf.check_overrides({"GLM53_TF_BATCH": {"a": 1}, "CANARY": ["warn"], "CANARY_MIN_TPS": None,
                                 "SERVED_NAME": "two\nlines", "CONTEXT": "262144", "GLM53_TF_VISION": True},
                                known())
    assert errors == [
        "tensorfold_env_overrides: CANARY must be a string, number or boolean, got list",
        "tensorfold_env_overrides: CANARY_MIN_TPS must be a string, number or boolean, got null",
        "tensorfold_env_overrides: GLM53_TF_BATCH must be a string, number or boolean, got dict",
        "tensorfold_env_overrides: SERVED_NAME must be one line (no newline or NUL in the value)",
    ]
    assert tf.check_overrides(["GLM53_TF_BATCH"], known()) == [
        "tensorfold_env_overrides must be a dict of KEY: value, got list"]
    assert tf.check_overrides({"lower-case": 1}, known()) == [
        "tensorfold_env_overrides: 'lower-case' is not a shell variable name"]


def test_whole_number_settings_are_refused_as_anything_else():
    errors = tf.check_overrides({"MEM_GATE_GIB": 3.5, "MEM_GATE_TIMEOUT": "10s", "SLOT_RETRIES": True,
                                 "START_ATTEMPTS": -1, "GLM53_TF_BATCH": "8", "READY_TIMEOUT": 0}, known())
    assert errors == [
        "tensorfold_env_overrides: MEM_GATE_GIB must be a whole number >= 0 (serve.sh compares it in bash "
        "arithmetic), got 3.5",
        "tensorfold_env_overrides: MEM_GATE_TIMEOUT must be a whole number >= 0 (serve.sh compares it in bash "
        "arithmetic), got '10s'",
        "tensorfold_env_overrides: SLOT_RETRIES must be a whole number >= 0 (serve.sh compares it in bash "
        "arithmetic), got True",
        "tensorfold_env_overrides: START_ATTEMPTS must be a whole number >= 0 (serve.sh compares it in bash "
        "arithmetic), got -1",
    ]


def test_the_memory_gate_is_read_from_the_rendered_file():
    assert tf.memory_gate_gib("MEM_GATE_GIB=108\nX=1\nMEM_GATE_GIB=3  # lab\n") == 3
    assert tf.memory_gate_gib("X=1\n") == 0
    assert tf_filter.tensorfold_env_gate("MEM_GATE_GIB=''\n") == 0
    with pytest.raises(AnsibleFilterError, match="MEM_GATE_GIB='1.5' is not a whole number of GiB"):
        tf_filter.tensorfold_env_gate("MEM_GATE_GIB=1.5\n")


def test_site_env_maps_the_contract_and_the_weights():
    site, errors = tf.site_env(contract(), WEIGHTS, "glm53-tensorfold:lp9001", HEAD_FACTS, WORKER_FACTS)
    assert errors == []
    assert site == {
        "WORKER_SSH": "spark@10.10.0.2", "HEAD_IP": "10.10.0.1",
        "NCCL_SOCKET_IFNAME": "enp1s0f1np1", "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1",
        "MASTER_PORT": "29551", "HEAD_HF": "/home/spark/.cache/huggingface", "WORKER_HF": "/data/hf",
        "MODEL_PATH": MODEL, "DRAFTER": DRAFTER, "IMAGE": "glm53-tensorfold:lp9001",
        "HOST": "127.0.0.1", "PORT": "8000",
    }
    # Per-node facts may also sit in weights.nodes; plain paths work too.
    nested = dict(WEIGHTS, nodes={"spark-a": {"hf_cache_dir": "/h"}, "spark-b": {"hf_cache_dir": "/w"}})
    site, errors = tf.site_env(contract(), nested, "img:1")
    assert errors == [] and site["HEAD_HF"] == "/h" and site["WORKER_HF"] == "/w"
    site, errors = tf.site_env(contract(), dict(WEIGHTS, drafter_path=""), "img:1", "/h", "/w")
    assert errors == [] and site["DRAFTER"] == ""


def test_a_contract_port_other_than_the_shipped_one_reaches_the_file(tmp_path):
    site, errors = tf.site_env(contract(master_port=29600), WEIGHTS, "glm53-tensorfold:lp9001", HEAD_FACTS,
                               WORKER_FACTS)
    assert errors == []
    got = bash_source(tf.render_env(EXAMPLE, site, {}, "generated for a test"), tmp_path)
    assert got["MASTER_PORT"] == "29600"


def test_the_api_bind_and_port_reach_the_file_as_host_and_port(tmp_path):
    site = tf_filter.tensorfold_env_site(contract(), WEIGHTS, "glm53-tensorfold:lp9001", HEAD_FACTS, WORKER_FACTS,
                                         api_bind="0.0.0.0", api_port=9000)
    assert site["errors"] == [] and (site["env"]["HOST"], site["env"]["PORT"]) == ("0.0.0.0", "9000")
    text = tf_filter.tensorfold_env_render(EXAMPLE, site)
    got = bash_source(text, tmp_path)
    assert got["HOST"] == "0.0.0.0" and got["PORT"] == "9000"
    assert assignments(text, "HOST") == ["HOST=0.0.0.0                     # loopback, no auth: put an authenticating "
                                         "proxy in front first"]
    # IPv6 and text digits (-e glm53_api_port=9001) too.
    site, errors = tf.site_env(contract(), WEIGHTS, "img:1", HEAD_FACTS, WORKER_FACTS, api_bind="::", api_port="9001")
    assert errors == [] and (site["HOST"], site["PORT"]) == ("::", "9001")


def test_a_bad_api_bind_or_port_is_a_site_error_naming_the_variable():
    # A role run on its own never went through playbooks/path.yml; the same check runs here.
    site, errors = tf.site_env(contract(), WEIGHTS, "img:1", HEAD_FACTS, WORKER_FACTS, api_bind="spark-a",
                               api_port=True)
    assert [error.partition(": expected")[0] for error in errors] == ["glm53_api_bind", "glm53_api_port"]
    assert "HOST" not in site and "PORT" not in site


def test_more_than_one_worker_is_refused_naming_vllm():
    site, errors = tf.site_env(contract(workers=("spark-b", "spark-c")), WEIGHTS, "img:1", HEAD_FACTS,
                               WORKER_FACTS)
    assert site == {}
    assert errors == ["tensorfold: the kit serves exactly two Sparks (one head, one worker); the cluster has 2 "
                      "worker(s) (spark-b, spark-c). Use -e path=vllm for more nodes."]


def test_a_contract_the_validator_refuses_never_reaches_prod_env():
    # The same check as cluster_contract's: before, an empty ssh_user gave WORKER_SSH without a
    # user and a zoned IPv6 address went into WORKER_SSH as it was.
    no_user = dict(contract(), ssh_user="")
    zoned = contract()
    zoned["nodes"]["spark-b"]["link_address"] = "fe80::1%enp1s0f1np1"
    for bad, problem in (
            (no_user, "ssh_user is empty, expected the user the head logs in to the workers as"),
            (zoned, "nodes.spark-b.link_address is 'fe80::1%enp1s0f1np1', an IPv6 link-local address with a zone"),
            (contract(workers=()), "workers is empty; path tensorfold needs at least one worker")):
        site, errors = tf.site_env(bad, WEIGHTS, "img:1", HEAD_FACTS, WORKER_FACTS)
        assert site == {} and len(errors) == 1, errors
        assert errors[0].startswith("tensorfold: the cluster contract is unusable (" + problem), errors[0]
        assert errors[0].endswith("; rerun the preflight (playbooks/preflight.yml -e path=tensorfold)")


def test_site_env_reports_unusable_facts_without_raising():
    worker_env = {"NCCL_SOCKET_IFNAME": "enP2p1s0f1np1", "NCCL_IB_HCA": "rocep1s0f1,roceP2p1s0f1"}
    weights = {"model_path": "/home/spark/.cache/huggingface/hub/x", "drafter_path": None}
    site, errors = tf.site_env(contract(worker_env=worker_env), weights, "", {"hf_cache_dir": "~/.cache/hf"},
                               {"hf_cache_dir": "/data/hf", "model_path": MODEL})
    assert errors == [
        "tensorfold: NCCL_SOCKET_IFNAME differs between the head (enp1s0f1np1) and the worker (enP2p1s0f1np1); "
        "serve.sh gives both ranks the head's value, so the link netdevs must have the same names",
        "tensorfold: HEAD_HF must be an absolute host path on spark-a, found '~/.cache/hf' (expand ~ on the node)",
        "tensorfold: MODEL_PATH must be a container path under /root/.cache/huggingface (the HF cache mount), "
        "found '/home/spark/.cache/huggingface/hub/x'",
        "tensorfold: the hf_weights facts lack drafter_path (for DRAFTER)",
        "tensorfold: spark-b holds MODEL_PATH %s, not /home/spark/.cache/huggingface/hub/x; both ranks load the "
        "same snapshot (rerun hf_weights)" % MODEL,
        "tensorfold: no image name (tensorfold_image)",
    ]
    assert "HEAD_HF" not in site and "WORKER_HF" in site
    assert tf.site_env(None, WEIGHTS, "img:1") == (
        {}, ["tensorfold: the cluster contract is missing (run the cx7_link preflight first)"])


def test_the_filters_check_before_they_render(tmp_path):
    site = tf_filter.tensorfold_env_site(contract(), WEIGHTS, "glm53-tensorfold:lp9001", HEAD_FACTS, WORKER_FACTS)
    assert site["errors"] == []
    assert tf_filter.tensorfold_env_errors({"GLM53_TF_BATCH": 4}, EXAMPLE, site) == []
    text = tf_filter.tensorfold_env_render(EXAMPLE, site, {"GLM53_TF_BATCH": 4})
    assert text.startswith("# Generated by dgx_spark.glm53 (tensorfold role)")
    got = bash_source(text, tmp_path)
    assert got["HEAD_IP"] == "10.10.0.1" and got["GLM53_TF_BATCH"] == "4"

    # A site without the head's address leaves a placeholder serve.sh would refuse.
    partial = dict(SITE)
    del partial["HEAD_IP"]
    assert tf_filter.tensorfold_env_errors({}, EXAMPLE, partial) == [
        "prod.env: HEAD_IP is still the placeholder '<head-ip>'; serve.sh refuses to start (the site value is "
        "missing)"]
    with pytest.raises(AnsibleFilterError, match="unknown key 'GLM53_TF_BACH'"):
        tf_filter.tensorfold_env_render(EXAMPLE, site, {"GLM53_TF_BACH": 4})
    bad_site = tf_filter.tensorfold_env_site(contract(workers=("b", "c")), WEIGHTS, "img:1")
    with pytest.raises(AnsibleFilterError, match="Use -e path=vllm for more nodes"):
        tf_filter.tensorfold_env_render(EXAMPLE, bad_site)
    assert tf_filter.tensorfold_env_errors({}, "A=$HOME\n") == [
        "prod-c8.env.example: line 1: '$' expands at run time; quote it with single quotes"]


def test_rendering_is_stable():
    once = tf.render_env(EXAMPLE, SITE, AWKWARD, "generated for a test")
    assert tf.render_env(EXAMPLE, SITE, AWKWARD, "generated for a test") == once
    # Rendering the rendered file again with the same values changes nothing but the header.
    again = tf.render_env(once, SITE, AWKWARD, "generated for a test")
    assert tf.effective(tf.parse_env(again)) == tf.effective(tf.parse_env(once))


@pytest.mark.parametrize("value, quoted", [
    ("plain/path:1", "plain/path:1"),
    ("", ""),
    ("two words", "'two words'"),
    ("it's", "'it'\"'\"'s'"),
    ("$HOME", "'$HOME'"),
])
def test_shell_quote_is_read_back_exactly_by_the_parser_and_by_bash(value, quoted):
    assert tf.shell_quote(value) == quoted
    line = "K=%s\n" % tf.shell_quote(value)
    assert tf.effective(tf.parse_env(line))["K"] == value
    out = subprocess.run(["bash", "-c", 'source /dev/stdin <<< "$1"; printf %s "$K"', "bash", line],
                         capture_output=True, text=True, check=True).stdout
    assert out == value
