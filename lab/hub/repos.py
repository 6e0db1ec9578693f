#!/usr/bin/env python
"""Deterministic test repositories for the lab hub (lab/hub/hub.py).

The collection's pinned model repositories, under their real names and at their real
commit shas, with stand-in content: the small JSON/text files are short synthetic
versions, the LFS files are valid safetensors files (one U8 tensor) whose data is
incompressible pseudo-random bytes from a seed. Nothing here is a real checkpoint.

    python lab/hub/repos.py --root DIR [--bench] [--lfs-size BYTES]

generates them under DIR/repos (what `hub.py serve` also does at start). Regeneration is
idempotent: a file is rewritten only when it is missing or differs from what the manifest
DIR/repos/<org>/<name>/<sha>.json recorded for its spec (size and mtime, or content).
Standard library only; runs under the controller's system python3.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import struct
from dataclasses import dataclass, field
from pathlib import Path

MIB = 1 << 20
CHUNK = 8 * MIB  # randbytes() chunk: fixed, so the byte stream never depends on the caller
FORMAT = 1  # bump when the generated content changes for the same spec

GATED_TOKEN = "hf_lab_gated_token_0123456789"

TR3 = "brandonmusic/GLM-5.3-Flash-tr3-4bpw"
DFLASH = "incoai/GLM-5.3-Flash-DFlash2"
NVFP4 = "LibertAIDAI/GLM-5.3-Flash-NVFP4"
GATED = "glm53-lab/gated-model"
BENCH = "glm53-lab/bench-1g"

# The collection's pinned revisions (roles/cx7_link/vars/main.yml) and the lab-only ones.
PINNED = {
    TR3: "5ab363a8dcf6405955fd5f99671e01a1c9fb124b",
    DFLASH: "7d74cdd881ed7e32c31175984a67823127b66cfe",
    NVFP4: "9e0d74e3cef17f634e84fb8e2223707e02616290",
    GATED: "50ea7830a2158ed664558a85c58dc30f916237ad",
    BENCH: "068074daeff6887f4135867b352b86e51583d47c",
}

LAST_MODIFIED = "2026-05-12T09:14:03.000Z"
CREATED_AT = "2026-05-02T17:40:51.000Z"
LAB_NOTE = "synthetic stand-in served by the glm53 lab hub (lab/hub/repos.py); not the real checkpoint"


@dataclass(frozen=True)
class FileSpec:
    """One file of a repo: `text` for a small git file, else an LFS file of `size` bytes."""

    name: str
    text: bytes | None = None
    size: int = 0
    seed: str = ""

    @property
    def lfs(self) -> bool:
        return self.text is None

    def key(self) -> str:
        """Identity of the content this spec generates (recorded in the manifest)."""
        h = hashlib.sha256(f"{FORMAT}\0{self.name}\0{self.size}\0{self.seed}\0".encode())
        h.update(self.text if self.text is not None else b"<lfs>")
        return h.hexdigest()


@dataclass(frozen=True)
class RepoSpec:
    repo_id: str
    sha: str
    files: tuple[FileSpec, ...]
    gated: str | bool = False  # "manual" / "auto" like the Hub, or False
    tokens: tuple[str, ...] = ()  # tokens granted access to a gated repo
    license: str | None = None
    tags: tuple[str, ...] = ()


@dataclass
class RepoFile:
    """A generated file as the hub serves it."""

    name: str
    path: Path
    size: int
    blob_id: str  # git oid of the file, or of its LFS pointer
    sha256: str | None = None  # LFS only
    pointer_size: int | None = None  # LFS only

    @property
    def lfs(self) -> bool:
        return self.sha256 is not None

    @property
    def etag(self) -> str:
        return self.sha256 or self.blob_id


@dataclass
class Repo:
    spec: RepoSpec
    dir: Path
    files: dict[str, RepoFile] = field(default_factory=dict)

    @property
    def repo_id(self) -> str:
        return self.spec.repo_id

    @property
    def sha(self) -> str:
        return self.spec.sha

    @property
    def used_storage(self) -> int:
        return sum(f.size for f in self.files.values())


# ------------------------------------------------------------------ content helpers


def git_blob_id(data: bytes) -> str:
    """`git hash-object` of `data`."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256: str, size: int) -> bytes:
    """The Git LFS pointer file the repo's git tree holds for an LFS file."""
    return f"version https://git-lfs.github.com/spec/v1\noid sha256:{sha256}\nsize {size}\n".encode()


def safetensors_header(name: str, size: int) -> bytes:
    """8-byte length + JSON header of a safetensors file of exactly `size` bytes holding one
    U8 tensor that fills the rest (the header is padded with spaces to 8 bytes, as the
    format allows)."""
    header_len = 0
    for _attempt in range(4):  # the data length's digits change the header length: converge
        data_len = size - 8 - header_len
        meta = {
            "__metadata__": {"format": "pt", "glm53_lab": LAB_NOTE},
            tensor_name(name): {"dtype": "U8", "shape": [data_len], "data_offsets": [0, data_len]},
        }
        raw = json.dumps(meta, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        if len(raw) == header_len:
            break
        header_len = len(raw)
    if size - 8 - header_len < 0:
        raise ValueError(f"{name}: {size} bytes is too small for a safetensors file (minimum {8 + header_len})")
    return struct.pack("<Q", header_len) + raw


def tensor_name(filename: str) -> str:
    return "glm53_lab." + filename.rsplit(".", 1)[0].replace("-", "_") + ".weight"


def lfs_chunks(spec: FileSpec):
    """The bytes of an LFS file, in chunks: a safetensors header (for .safetensors), then
    pseudo-random bytes from random.Random(seed) (fast and incompressible)."""
    head = safetensors_header(spec.name, spec.size) if spec.name.endswith(".safetensors") else b""
    yield head
    rng = random.Random(spec.seed)
    left = spec.size - len(head)
    while left > 0:
        n = min(CHUNK, left)
        yield rng.randbytes(n)
        left -= n


def _json(obj) -> bytes:
    return (json.dumps(obj, indent=2) + "\n").encode()


GITATTRIBUTES = b"""*.bin filter=lfs diff=lfs merge=lfs -text
*.pt filter=lfs diff=lfs merge=lfs -text
*.safetensors filter=lfs diff=lfs merge=lfs -text
"""


def _config(**extra) -> bytes:
    base = {
        "_glm53_lab": LAB_NOTE,
        "architectures": ["Glm4MoeForCausalLM"],
        "model_type": "glm4_moe",
        "hidden_size": 4096,
        "num_hidden_layers": 46,
        "num_attention_heads": 96,
        "num_key_value_heads": 8,
        "n_routed_experts": 128,
        "num_experts_per_tok": 8,
        "vocab_size": 151552,
        "max_position_embeddings": 262144,
        "torch_dtype": "bfloat16",
    }
    base.update(extra)
    return _json(base)


def _tokenizer() -> bytes:
    vocab = {tok: i for i, tok in enumerate(["<|endoftext|>", "[gMASK]", "<sop>", "<|user|>", "<|assistant|>", "a", "b"])}
    return _json({"version": "1.0", "added_tokens": [], "model": {"type": "BPE", "vocab": vocab, "merges": []}})


def _tokenizer_config() -> bytes:
    return _json({"tokenizer_class": "PreTrainedTokenizerFast", "eos_token": "<|endoftext|>", "model_max_length": 262144})


def _chat_template() -> bytes:
    """A short GLM-style chat template (the real one is longer; the engines' stand-ins never render it)."""
    return (
        "{#- " + LAB_NOTE + " -#}\n"
        "[gMASK]<sop>\n"
        "{%- for message in messages %}\n"
        "{%- if message['role'] == 'system' %}<|system|>\n{{ message['content'] }}\n"
        "{%- elif message['role'] == 'user' %}<|user|>\n{{ message['content'] }}\n"
        "{%- elif message['role'] == 'assistant' %}<|assistant|>\n{{ message['content'] }}\n"
        "{%- endif %}\n"
        "{%- endfor %}\n"
        "{%- if add_generation_prompt %}<|assistant|>\n{%- endif %}\n"
    ).encode()


def _index(shards: list[FileSpec]) -> bytes:
    """model.safetensors.index.json over `shards` (tensor bytes and weight_map consistent with them)."""
    total = sum(s.size - len(safetensors_header(s.name, s.size)) for s in shards)
    return _json({"metadata": {"total_size": total}, "weight_map": {tensor_name(s.name): s.name for s in shards}})


def _lfs(repo_id: str, sha: str, name: str, size: int) -> FileSpec:
    return FileSpec(name=name, size=size, seed=f"glm53-lab:{repo_id}@{sha}:{name}")


def _model_card(license_id: str, body: str) -> bytes:
    return f"---\nlicense: {license_id}\nlibrary_name: transformers\n---\n\n{body}\n\n{LAB_NOTE}.\n".encode()


def catalog(bench: bool = False, lfs_size: int | None = None) -> dict[str, RepoSpec]:
    """{repo_id: spec} of the lab repos. `bench` adds glm53-lab/bench-1g (1 GiB); `lfs_size`
    makes every LFS file that many bytes instead of its lab size (small, fast unit tests)."""

    def size(default: int) -> int:
        return lfs_size if lfs_size is not None else default

    specs = []
    sha = PINNED[TR3]
    shards = [_lfs(TR3, sha, f"model-0000{i}-of-00003.safetensors", size(64 * MIB)) for i in (1, 2, 3)]
    specs.append(RepoSpec(TR3, sha, (
        FileSpec(".gitattributes", GITATTRIBUTES),
        FileSpec("config.json", _config(quantization_config={"quant_method": "exl3", "bits": 4.0, "format": "tr3"})),
        FileSpec("generation_config.json", _json({"do_sample": True, "temperature": 1.0, "top_p": 0.95, "eos_token_id": [0]})),
        FileSpec("tokenizer.json", _tokenizer()),
        FileSpec("tokenizer_config.json", _tokenizer_config()),
        FileSpec("model.safetensors.index.json", _index(shards)),
        *shards,
    ), tags=("safetensors", "glm4_moe", "exl3")))

    sha = PINNED[DFLASH]
    specs.append(RepoSpec(DFLASH, sha, (
        FileSpec(".gitattributes", GITATTRIBUTES),
        FileSpec("LICENSE", b"Creative Commons Attribution-NonCommercial-NoDerivatives 4.0 International (CC BY-NC-ND 4.0)\n"
                 b"https://creativecommons.org/licenses/by-nc-nd/4.0/legalcode\n"),
        FileSpec("README.md", _model_card("cc-by-nc-nd-4.0", "# GLM-5.3 Flash DFlash2 drafter\n\nLicense: CC BY-NC-ND 4.0 (non-commercial).")),
        FileSpec("config.json", _config(architectures=["DFlashDraftModel"], num_hidden_layers=2)),
        _lfs(DFLASH, sha, "model.safetensors", size(32 * MIB)),
    ), license="cc-by-nc-nd-4.0", tags=("safetensors", "license:cc-by-nc-nd-4.0")))

    sha = PINNED[NVFP4]
    shards = [_lfs(NVFP4, sha, f"model-0000{i}-of-00002.safetensors", size(64 * MIB)) for i in (1, 2)]
    specs.append(RepoSpec(NVFP4, sha, (
        FileSpec(".gitattributes", GITATTRIBUTES),
        FileSpec("config.json", _config(quantization_config={"quant_method": "modelopt", "quant_algo": "NVFP4"})),
        FileSpec("tokenizer.json", _tokenizer()),
        FileSpec("tokenizer_config.json", _tokenizer_config()),
        FileSpec("chat_template.jinja", _chat_template()),
        FileSpec("model.safetensors.index.json", _index(shards)),
        *shards,
    ), tags=("safetensors", "glm4_moe", "nvfp4")))

    sha = PINNED[GATED]
    specs.append(RepoSpec(GATED, sha, (
        FileSpec("config.json", _config(num_hidden_layers=1)),
        _lfs(GATED, sha, "model.safetensors", size(8 * MIB)),
    ), gated="manual", tokens=(GATED_TOKEN,)))

    if bench:
        sha = PINNED[BENCH]
        specs.append(RepoSpec(BENCH, sha, (
            FileSpec("config.json", _config()),
            *(_lfs(BENCH, sha, f"model-0000{i}-of-00008.safetensors", size(128 * MIB)) for i in range(1, 9)),
        )))
    return {s.repo_id: s for s in specs}


# ------------------------------------------------------------------- generation


def _repo_dir(root: Path, spec: RepoSpec) -> Path:
    return root / "repos" / spec.repo_id / spec.sha


def _manifest_path(root: Path, spec: RepoSpec) -> Path:
    return root / "repos" / spec.repo_id / f"{spec.sha}.json"


def _write_atomic(path: Path, chunks) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    try:
        with open(tmp, "wb") as fh:
            for chunk in chunks:
                fh.write(chunk)
        os.replace(tmp, path)
    finally:
        if tmp.exists():
            tmp.unlink()


def _generate(path: Path, spec: FileSpec) -> dict:
    """Write one file; return its manifest entry."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not spec.lfs:
        _write_atomic(path, [spec.text])
        return {"key": spec.key(), "size": len(spec.text), "blob_id": git_blob_id(spec.text)}
    digest = hashlib.sha256()

    def hashed():
        for chunk in lfs_chunks(spec):
            digest.update(chunk)
            yield chunk

    _write_atomic(path, hashed())
    pointer = lfs_pointer(digest.hexdigest(), spec.size)
    return {
        "key": spec.key(),
        "size": spec.size,
        "sha256": digest.hexdigest(),
        "blob_id": git_blob_id(pointer),
        "pointer_size": len(pointer),
        "mtime_ns": path.stat().st_mtime_ns,
    }


def _still_good(path: Path, spec: FileSpec, entry: dict | None) -> bool:
    if entry is None or entry.get("key") != spec.key():
        return False
    try:
        st = path.stat()
    except OSError:
        return False
    if not spec.lfs:
        return path.read_bytes() == spec.text
    return st.st_size == spec.size and st.st_mtime_ns == entry.get("mtime_ns")


def ensure_repo(root: Path, spec: RepoSpec, log=None) -> tuple[Repo, list[str]]:
    """Generate what is missing or wrong of one repo; (repo, names of the files written)."""
    root = Path(root)
    repo_dir = _repo_dir(root, spec)
    manifest_path = _manifest_path(root, spec)
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    entries = manifest.get("files", {}) if isinstance(manifest, dict) else {}
    written = []
    new_entries = {}
    for fspec in spec.files:
        path = repo_dir / fspec.name
        entry = entries.get(fspec.name)
        if not _still_good(path, fspec, entry):
            if log and fspec.lfs:
                log(f"generating {spec.repo_id}/{fspec.name} ({fspec.size} bytes)")
            entry = _generate(path, fspec)
            written.append(fspec.name)
        new_entries[fspec.name] = entry
    # Files of an older spec that are no longer part of the repo.
    wanted = {f.name for f in spec.files}
    if repo_dir.is_dir():
        for extra in sorted(p for p in repo_dir.rglob("*") if p.is_file()):
            if extra.relative_to(repo_dir).as_posix() not in wanted:
                extra.unlink()
                written.append(f"-{extra.name}")
    new_manifest = {"repo_id": spec.repo_id, "sha": spec.sha, "files": new_entries}
    if written or manifest != new_manifest:
        _write_atomic(manifest_path, [(json.dumps(new_manifest, indent=1, sort_keys=True) + "\n").encode()])
    repo = Repo(spec=spec, dir=repo_dir)
    for fspec in spec.files:
        e = new_entries[fspec.name]
        repo.files[fspec.name] = RepoFile(
            name=fspec.name, path=repo_dir / fspec.name, size=e["size"], blob_id=e["blob_id"],
            sha256=e.get("sha256"), pointer_size=e.get("pointer_size"),
        )
    return repo, written


def ensure(root, specs=None, log=None) -> dict[str, Repo]:
    """Generate (idempotently) every repo of `specs` (default: catalog()) under `root`."""
    specs = catalog() if specs is None else specs
    if isinstance(specs, dict):
        specs = list(specs.values())
    out = {}
    for spec in specs:
        out[spec.repo_id], written = ensure_repo(Path(root), spec, log=log)
        if log and written:
            log(f"{spec.repo_id}@{spec.sha[:12]}: wrote {len(written)} file(s)")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Generate the lab hub's test repositories.")
    parser.add_argument("--root", required=True, help="data directory of the hub (repos go to ROOT/repos)")
    parser.add_argument("--bench", action="store_true", help="also glm53-lab/bench-1g (8 x 128 MiB)")
    parser.add_argument("--lfs-size", type=int, default=None, help="bytes of every LFS file (default: lab sizes)")
    args = parser.parse_args(argv)
    repos = ensure(args.root, catalog(bench=args.bench, lfs_size=args.lfs_size), log=print)
    for repo in repos.values():
        print(f"{repo.repo_id}@{repo.sha}: {len(repo.files)} files, {repo.used_storage} bytes")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
