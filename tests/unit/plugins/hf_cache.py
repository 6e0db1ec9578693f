"""A Hugging Face hub cache on disk as huggingface_hub lays it out: with the verified manifest
hf_snapshot writes, for the hf_mirror tests; a repo with the hub's hashes of its files, for the
verification and repair tests; a checkpoint as vLLM loads it (config, index, chat template,
shards), for the checkpoint_check tests; and independent readers of such a tree (sha256 of
every file, links as they are, to compare copies with; coreutils' sha256sum, as the vLLM
recipe runs it)."""

import hashlib
import json
import os
import shutil
import subprocess

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_cache import repo_folder, snapshot_folder
from ansible_collections.dgx_spark.glm53.plugins.module_utils._hf_manifest import blob_name

RSYNC = shutil.which("rsync")
REVISION = "5ab363a8" + "0" * 32


def need_rsync():
    if not RSYNC:
        pytest.fail("the hf_mirror tests run the real rsync, which is not on PATH: install rsync (apt-get install rsync)")
    return RSYNC


def folder(repo_id):
    return "models--" + repo_id.replace("/", "--")


def make_snapshot(cache_dir, repo_id="org/model", revision=REVISION, files=None, manifest=True):
    """Write blobs, relative snapshot links and (unless ``manifest`` is false) the manifest under
    ``cache_dir/hub``. ``files``: {name: bytes}. Returns the manifest as a dict."""
    files = files if files is not None else {"model.safetensors": os.urandom(3 << 20), "config.json": b'{"a": 1}\n'}
    repo_dir = os.path.join(str(cache_dir), "hub", folder(repo_id))
    os.makedirs(os.path.join(repo_dir, "blobs"), exist_ok=True)
    os.makedirs(os.path.join(repo_dir, "refs"), exist_ok=True)
    with open(os.path.join(repo_dir, "refs", "main"), "w") as handle:
        handle.write(revision)
    rows = []
    for name, data in sorted(files.items()):
        digest = hashlib.sha256(data).hexdigest()
        with open(os.path.join(repo_dir, "blobs", digest), "wb") as handle:
            handle.write(data)
        link = os.path.join(repo_dir, "snapshots", revision, name)
        os.makedirs(os.path.dirname(link), exist_ok=True)
        if os.path.lexists(link):
            os.unlink(link)
        os.symlink(os.path.relpath(os.path.join(repo_dir, "blobs", digest), os.path.dirname(link)), link)
        rows.append({"name": name, "size": len(data), "sha256": digest, "lfs": True})
    doc = {"schema": 1, "repo_id": repo_id, "revision": revision, "files": rows,
           "bytes": sum(row["size"] for row in rows), "verified_with": "sha256"}
    if manifest:
        os.makedirs(os.path.join(repo_dir, ".glm53"), exist_ok=True)
        with open(os.path.join(repo_dir, ".glm53", revision + ".json"), "w") as handle:
            json.dump(doc, handle, indent=1, sort_keys=True)
    return doc


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def tree(root):
    """{relative path: ("link", target) | ("file", sha256, size)} of everything under ``root``."""
    out = {}
    for base, dirs, names in os.walk(str(root)):
        for name in names + [d for d in dirs if os.path.islink(os.path.join(base, d))]:
            path = os.path.join(base, name)
            rel = os.path.relpath(path, str(root))
            if os.path.islink(path):
                out[rel] = ("link", os.readlink(path))
            else:
                out[rel] = ("file", sha256_file(path), os.path.getsize(path))
    return out


def git_blob(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class Tree(object):
    """A repo in the hub cache, laid out as huggingface_hub writes it: blobs named by etag,
    relative links from snapshots/<sha>."""

    def __init__(self, root, repo_id, revision):
        self.repo_dir = repo_folder(str(root), repo_id)
        self.snap = snapshot_folder(self.repo_dir, revision)
        self.blobs = os.path.join(self.repo_dir, "blobs")
        os.makedirs(self.blobs)
        os.makedirs(self.snap)
        self.files = []

    def add(self, name, data, lfs):
        entry = {"name": name, "size": len(data), "lfs": lfs,
                 "sha256": hashlib.sha256(data).hexdigest() if lfs else None,
                 "git_sha1": None if lfs else git_blob(data)}
        blob = os.path.join(self.blobs, blob_name(entry))
        with open(blob, "wb") as handle:
            handle.write(data)
        link = os.path.join(self.snap, *name.split("/"))
        if not os.path.isdir(os.path.dirname(link)):
            os.makedirs(os.path.dirname(link))
        os.symlink(os.path.relpath(blob, os.path.dirname(link)), link)
        self.files.append(entry)
        return entry

    def blob(self, entry):
        return os.path.join(self.blobs, blob_name(entry))


def small_tree(root, repo_id, revision):
    """A Tree with a small non-LFS file and a 3 MiB LFS file in a subfolder."""
    tree = Tree(root, repo_id, revision)
    tree.add("config.json", b'{"a": 1}\n', lfs=False)
    tree.add("sub/model.safetensors", os.urandom(3 * 1024 * 1024 + 17), lfs=True)
    return tree


CHAT_TEMPLATE = (b"[gMASK]<sop>{% for message in messages %}"
                 b"{% if message['role'] == 'user' %}<|user|>\n{{ message['content'] }}"
                 b"{% elif message['role'] == 'assistant' %}<|assistant|>\n{{ message['content'] }}{% endif %}"
                 b"{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


def checkpoint_tree(root, shards, repo_id="org/model", revision=REVISION):
    """A Tree holding a safetensors checkpoint as vLLM loads it: config.json, the index, whose
    weight_map names each shard of ``shards`` ({name: bytes}) for two tensors, chat_template.jinja,
    tokenizer_config.json, then the shards (LFS blobs)."""
    tree = Tree(root, repo_id, revision)
    weight_map = {}
    for number, name in enumerate(sorted(shards)):
        weight_map["model.layers.%d.mlp.weight" % number] = name
        weight_map["model.layers.%d.attn.weight" % number] = name
    index = json.dumps({"metadata": {"total_size": sum(len(d) for d in shards.values())},
                        "weight_map": weight_map}, indent=2).encode() + b"\n"
    tree.add("config.json", b'{"architectures": ["Glm4MoeForCausalLM"], "model_type": "glm4_moe"}\n', lfs=False)
    tree.add("model.safetensors.index.json", index, lfs=False)
    tree.add("chat_template.jinja", CHAT_TEMPLATE, lfs=False)
    tree.add("tokenizer_config.json", b'{"eos_token": "<|endoftext|>"}\n', lfs=False)
    for name, data in sorted(shards.items()):
        tree.add(name, data, lfs=True)
    return tree


def entry(tree, name):
    """The Tree's entry of the file ``name``."""
    return next(e for e in tree.files if e["name"] == name)


# The vLLM recipe's meta files, in its order (rank-tp2.sh), and three shards of 6000 bytes in all.
META_FILES = ("config.json", "model.safetensors.index.json", "chat_template.jinja", "tokenizer_config.json")
SHARDS = {"model-00001-of-00003.safetensors": b"\x01" * 1000, "model-00002-of-00003.safetensors": b"\x02" * 2000,
          "model-00003-of-00003.safetensors": b"\x03" * 3000}


def _sha256sum(directory, script, names):
    """stdout of ``script`` (a bash pipeline of coreutils' sha256sum over ``"$@"``) run in ``directory``."""
    if not shutil.which("sha256sum"):
        pytest.fail("sha256sum (coreutils) is not on PATH: apt-get install coreutils")
    proc = subprocess.run(["bash", "-o", "pipefail", "-c", script, "bash"] + list(names),
                          cwd=directory, capture_output=True, text=True, check=True)
    return proc.stdout


def shell_model_meta(directory, names=META_FILES):
    """What the recipe computes: `sha256sum <names> | sha256sum`, first field, run in ``directory``."""
    return _sha256sum(directory, 'sha256sum "$@" | sha256sum', names).split()[0]


def shell_sha256(directory, names=META_FILES):
    """{name: digest} as `sha256sum <names>` prints them."""
    return {line.split("  ", 1)[1]: line.split("  ", 1)[0]
            for line in _sha256sum(directory, 'sha256sum "$@"', names).splitlines()}
