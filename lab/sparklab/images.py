"""The lab's images: the node images (a debootstrap base and the node image on it) and the
kit's base image, preloaded into every node's own engine (no registry is reachable there).
Each is tagged or labelled by a hash of its recipe, so a changed recipe builds a new one."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from sparklab.commands import LabError, docker, inspect, log, node_exec, run
from sparklab.host import debian_mirror
from sparklab.layout import FIRST_ENGINE_HOST, IMAGE_DIR, LAB, LAB_ID, STATE, Node


PYTORCH_DIR = IMAGE_DIR / "pytorch"
PYTORCH_IMAGE = "glm53-lab/pytorch:26.07-py3"  # stands for nvcr.io/nvidia/pytorch:26.07-py3
VLLM_DIR = IMAGE_DIR / "vllm-openai"
# Stands for vllm/vllm-openai:glm53-flash-arm64-cu130@sha256:905c0293... (the recipe's base). A
# digest exists only for an image pulled from a registry, and the lab has none: the lab pins the
# base by its image ID instead (lab/.state/images.json, read by the lab inventory).
VLLM_BASE_IMAGE = "glm53-lab/vllm-openai:glm53-flash-arm64-cu130"
IMAGES_JSON = STATE / "images.json"
# Lab 1's engine, where lab N > 1 finds the images lab 1 built (docker save from there).
FIRST_ENGINE = dict(os.environ, DOCKER_HOST=FIRST_ENGINE_HOST)


@dataclass(frozen=True)
class Image:
    """An image the nodes load: its tag, its ID and the engine that holds it (None: this lab's
    own; FIRST_ENGINE: lab 1's, which lab N > 1 loads its nodes from instead of a copy of its own)."""

    tag: str
    id: str
    engine: dict | None = None


def tree_hash(*paths: Path, extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for root in paths:
        # Python's bytecode caches are not the recipe: a test or tool that imports a simulator
        # from the tree writes __pycache__ there, which must not make the image another one.
        files = [root] if root.is_file() else sorted(
            p for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo"))
        for f in files:
            h.update(str(f.relative_to(LAB)).encode() + b"\0")
            h.update(b"x" if os.access(f, os.X_OK) else b"-")
            h.update(f.read_bytes() + b"\0")
    return h.hexdigest()[:12]


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False).returncode == 0


def _first_lab_image(tag: str, label: tuple[str, str] | None = None) -> str | None:
    """Lab N > 1: the ID of `tag` in lab 1's engine when it is there (with the label `label`,
    when given) - the same recipe, not built a second time - else None."""
    if LAB_ID == 1:
        return None
    probe = run(["docker", "image", "inspect", "-f", "{{.Id}} {{json .Config.Labels}}", tag], check=False,
                env=FIRST_ENGINE)  # fmt: skip
    if probe.returncode != 0:
        return None
    image_id, _sep, labels = probe.stdout.strip().partition(" ")
    if label and ((json.loads(labels or "null") or {}).get(label[0]) != label[1]):
        return None
    return image_id


def load_from_first_lab(tag: str, label: tuple[str, str] | None = None) -> bool:
    """Lab N > 1: copy `tag` from lab 1's engine (docker save | docker load) when it is there
    (with the label `label`, when given) - the same recipe, not built a second time."""
    if _first_lab_image(tag, label) is None:
        return False
    t0 = time.time()
    save = subprocess.Popen(["docker", "save", tag], stdout=subprocess.PIPE, env=FIRST_ENGINE)
    load = subprocess.run(["docker", "load", "-q"], stdin=save.stdout, capture_output=True, timeout=900, check=False)
    save.stdout.close()
    save.wait(timeout=60)
    if save.returncode != 0 or load.returncode != 0:
        raise LabError(f"copying {tag} from lab 1's engine failed: {load.stderr.decode(errors='replace')}")
    log(f"copied {tag} from lab 1's engine in {time.time() - t0:.0f}s")
    return True


def drop_other_tags(repo: str, keep: str) -> None:
    """Old recipe builds: remove them unless a container still uses them."""
    out = docker("image", "ls", repo, "--format", "{{.Repository}}:{{.Tag}}").stdout.split()
    for tag in out:
        if tag != keep:
            docker("image", "rm", tag, check=False)


def ensure_base_image(base_tag: str, changes: list[str]) -> None:
    """The debootstrap base in this lab's engine: lab 1's copy, else built (needs root)."""
    if image_exists(base_tag):
        return
    if load_from_first_lab(base_tag):
        changes.append(f"copied {base_tag} from lab 1")
        return
    if os.geteuid() != 0:
        raise LabError("building the node base image needs root (debootstrap)")
    t0 = time.time()
    log(f"building {base_tag} (debootstrap, about a minute)")
    proc = run(["bash", str(IMAGE_DIR / "base" / "build.sh"), base_tag, debian_mirror()], check=False, timeout=1800)
    if proc.returncode != 0:
        raise LabError(f"base image build failed:\n{proc.stdout}{proc.stderr}")
    changes.append(f"built {base_tag} in {time.time() - t0:.0f}s")


def ensure_images(changes: list[str]) -> tuple[str, str]:
    """(node tag, base tag), building what the current recipe lacks."""
    base_tag = "glm53-lab/node-base:" + tree_hash(IMAGE_DIR / "base")
    node_tag = "glm53-lab/node:" + tree_hash(IMAGE_DIR / "node", extra=base_tag)
    if image_exists(node_tag):
        return node_tag, base_tag
    # Lab N > 1 needs the node image alone: its save holds the base's layer too, and lab N
    # builds nothing on the base while lab 1 has the kit's and vLLM's base images (its nodes
    # load them from there). Copying the base as well moved its 500 MB twice per lab.
    if load_from_first_lab(node_tag):
        changes.append(f"copied {node_tag} from lab 1")
        return node_tag, base_tag
    ensure_base_image(base_tag, changes)
    t0 = time.time()
    log(f"building {node_tag}")
    # Legacy builder: no buildx plugin is needed, and it is all the recipe uses.
    env = dict(os.environ, DOCKER_BUILDKIT="0")
    proc = run(
        ["docker", "build", "--quiet", "--build-arg", f"BASE={base_tag}", "-t", node_tag, str(IMAGE_DIR / "node")],
        check=False,
        env=env,
    )
    if proc.returncode != 0:
        raise LabError(f"node image build failed:\n{proc.stdout}{proc.stderr}")
    changes.append(f"built {node_tag} in {time.time() - t0:.0f}s")
    return node_tag, base_tag


def _own_or_first_lab(tag: str, recipe: str) -> tuple[Image | None, dict | None]:
    """(the image of this recipe in this lab's engine, else in lab 1's; None when neither has
    it) and this engine's inspect of `tag` (an older build, or None)."""
    info = inspect("image", tag)
    if info is not None and (info["Config"].get("Labels") or {}).get("glm53-lab.recipe") == recipe:
        return Image(tag, info["Id"]), info
    first = _first_lab_image(tag, label=("glm53-lab.recipe", recipe))
    if first is not None:
        if info is not None:
            docker("image", "rm", info["Id"], check=False)  # an older copy: the nodes load lab 1's
        return Image(tag, first, FIRST_ENGINE), None
    return None, info


def ensure_pytorch_image(base_tag: str, changes: list[str]) -> Image:
    """PYTORCH_IMAGE on the controller, from the node base image and lab/image/pytorch;
    rebuilt when that recipe or the base changes. Lab N > 1 uses lab 1's when it is this
    recipe: its nodes load it from there, with no copy in this lab's engine."""
    recipe = tree_hash(PYTORCH_DIR, extra=base_tag)
    found, info = _own_or_first_lab(PYTORCH_IMAGE, recipe)
    if found is not None:
        return found
    ensure_base_image(base_tag, changes)
    t0 = time.time()
    log(f"building {PYTORCH_IMAGE} (apt: python3-pip, about a minute)")
    work = f"glm53-lab-pytorch-build-{recipe}"
    docker("rm", "-f", work, check=False)
    script = (PYTORCH_DIR / "setup.sh").read_text()
    proc = docker("run", "-i", "--name", work, base_tag, "sh", "-s", debian_mirror(), input=script, check=False, timeout=1200)
    if proc.returncode != 0:
        docker("rm", "-f", work, check=False)
        raise LabError(f"{PYTORCH_IMAGE}: setup failed:\n{proc.stdout}{proc.stderr}")
    # One flat layer: what the setup removed is not carried along underneath.
    changes_args = [
        "--change", "LABEL glm53-lab=1", "--change", f"LABEL glm53-lab.recipe={recipe}",
        "--change", "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "--change", 'CMD ["python3"]',
    ]  # fmt: skip
    export = subprocess.Popen(["docker", "export", work], stdout=subprocess.PIPE)
    imported = subprocess.run(["docker", "import", *changes_args, "-", PYTORCH_IMAGE], stdin=export.stdout,
                              capture_output=True, timeout=600, check=False)  # fmt: skip
    export.stdout.close()
    export.wait(timeout=60)
    docker("rm", "-f", work, check=False)
    if export.returncode != 0 or imported.returncode != 0:
        raise LabError(f"{PYTORCH_IMAGE}: export/import failed: {imported.stderr.decode(errors='replace')}")
    if info is not None:
        docker("image", "rm", info["Id"], check=False)  # the previous build, now untagged
    changes.append(f"built {PYTORCH_IMAGE} in {time.time() - t0:.0f}s")
    return Image(PYTORCH_IMAGE, inspect("image", PYTORCH_IMAGE)["Id"])


def ensure_vllm_base_image(pytorch: Image, changes: list[str]) -> Image:
    """VLLM_BASE_IMAGE on the controller, from PYTORCH_IMAGE, lab/image/vllm-openai and the
    simulated vLLM (lab/sim/vllm); rebuilt when any of them changes (lab N > 1: lab 1's, as
    for PYTORCH_IMAGE). Records its image ID in IMAGES_JSON (the lab inventory's
    vllm_nvfp4_base_image_id)."""
    recipe = tree_hash(VLLM_DIR, LAB / "sim" / "vllm", extra=pytorch.id)
    found, info = _own_or_first_lab(VLLM_BASE_IMAGE, recipe)
    if found is None:
        if pytorch.engine is not None and load_from_first_lab(PYTORCH_IMAGE):
            changes.append(f"copied {PYTORCH_IMAGE} from lab 1 (to build on)")
        t0 = time.time()
        with tempfile.TemporaryDirectory() as ctx:
            shutil.copy(VLLM_DIR / "Dockerfile", ctx)
            shutil.copytree(LAB / "sim" / "vllm", Path(ctx) / "vllm", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
            proc = run(["docker", "build", "--quiet", "--build-arg", f"BASE={PYTORCH_IMAGE}", "--label",
                        f"glm53-lab.recipe={recipe}", "-t", VLLM_BASE_IMAGE, ctx],
                       check=False, env=dict(os.environ, DOCKER_BUILDKIT="0"), timeout=600)  # fmt: skip
        if proc.returncode != 0:
            raise LabError(f"{VLLM_BASE_IMAGE}: build failed:\n{proc.stdout}{proc.stderr}")
        changes.append(f"built {VLLM_BASE_IMAGE} in {time.time() - t0:.0f}s")
        if info is not None:
            docker("image", "rm", info["Id"], check=False)  # the previous build, now untagged
        found = Image(VLLM_BASE_IMAGE, inspect("image", VLLM_BASE_IMAGE)["Id"])
    record = json.dumps({"vllm_base": {"image": VLLM_BASE_IMAGE, "id": found.id}}, indent=2) + "\n"
    if not IMAGES_JSON.is_file() or IMAGES_JSON.read_text() != record:
        IMAGES_JSON.write_text(record)
        changes.append(f"wrote {IMAGES_JSON.name}")
    return found


def ensure_images_in_node(node: Node, images: list[Image]) -> list[str]:
    """`images` in the node's own engine, each loaded when missing or another build. Those from
    one engine go in one `docker save`: it holds a layer they share once (the vLLM base is the
    kit's base and 300 kB), so the head reads and writes 220 MB, not twice that."""
    tags = " ".join(image.tag for image in images)
    out = node_exec(node.name, f"for t in {tags}; do docker image inspect -f '{{{{.Id}}}}' $t 2>/dev/null || echo -; done")
    have = dict(zip((image.tag for image in images), out.stdout.split()))
    missing = [image for image in images if have.get(image.tag) != image.id]
    changes = []
    for engine in {id(image.engine): image.engine for image in missing}.values():
        group = [image.tag for image in missing if image.engine is engine]
        save = subprocess.Popen(["docker", "save", *group], stdout=subprocess.PIPE, env=engine)
        load = subprocess.run(["docker", "exec", "-i", node.name, "docker", "load", "-q"], stdin=save.stdout,
                              capture_output=True, timeout=600, check=False)  # fmt: skip
        save.stdout.close()
        save.wait(timeout=60)
        if save.returncode != 0 or load.returncode != 0:
            raise LabError(f"{node.name}: loading {' '.join(group)} failed: {load.stderr.decode(errors='replace')}")
        changes += [f"{node.name}: loaded {tag} into its engine" for tag in group]
    old = [have[image.tag] for image in missing if have.get(image.tag, "-") != "-"]
    if old:
        node_exec(node.name, f"docker image rm {' '.join(old)}", check=False)  # previous builds, if unused
    return changes
