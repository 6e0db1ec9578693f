"""The lab's git server, half of the TensorFold path the tensorfold role deploys in the lab
(lab/README.md, "TensorFold path"; the other half is the kit's base image, images.py): the
simulated kit and profile repositories (lab/sim/) as git repositories with fixed identities
and dates, so identical content always gives the same commit shas, and a read-only git
daemon on the management gateway the nodes clone from."""

from __future__ import annotations

import json
import os
import re
import tempfile
from pathlib import Path

from sparklab.commands import LabError, log, run
from sparklab.daemons import pid_in, process_argv, start_server, stop_pid_file, terminate, wait_ready
from sparklab.layout import LAB, REPO, STATE
from sparklab.netns import same_netns

SIM = LAB / "sim"
GIT_ROOT = STATE / "git"  # kit.git, TensorFold.git, profile.git, commits.json
GIT_COMMITS = GIT_ROOT / "commits.json"
GIT_HOST, GIT_PORT = "198.18.0.1", 9418  # glm53-lab-mgmt's gateway: the controller, seen from the nodes
GIT_URL = f"git://{GIT_HOST}"
GIT_PID = STATE / "git-daemon.pid"
GIT_LOG = STATE / "git-daemon.log"
# Fixed author, committer and dates: a commit sha depends only on the content.
GIT_ENV = {
    "GIT_AUTHOR_NAME": "glm53 lab", "GIT_AUTHOR_EMAIL": "lab@glm53-lab.invalid",
    "GIT_COMMITTER_NAME": "glm53 lab", "GIT_COMMITTER_EMAIL": "lab@glm53-lab.invalid",
    # No user or system config (signing, commit encoding) may change a sha.
    "GIT_CONFIG_GLOBAL": "/dev/null", "GIT_CONFIG_NOSYSTEM": "1", "LC_ALL": "C",
}  # fmt: skip
GIT_DATES = {  # epoch seconds, UTC
    "tensorfold": 1788566400,  # 2026-09-05
    "kit": 1790769600,  # 2026-09-30 12:00 (the kit's W17 release)
    "profile-1": 1790856000,  # 2026-10-01 12:00
    "profile-2": 1790942400,  # 2026-10-02 12:00
    "recipe": 1791028800,  # 2026-10-03 12:00 (the vLLM recipe)
}
# The second profile commit changes only the overlay: this line is appended to one file.
OVERLAY_REVISION = "# glm53 lab: profile commit 2 changes only the overlay (a different lp9001 image).\n"


def shown(path: Path) -> str:
    """A path as messages show it: relative to the checkout when inside it."""
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def sim_source(name: str) -> Path:
    """lab/sim/<name>: the simulated engine `tensorfold` or its patched modules `profile-overlay`."""
    return SIM / name


def git(repo: Path, *args: str, input=None, env=None) -> str:
    full_env = dict(os.environ, **GIT_ENV, **(env or {}))
    return run(["git", f"--git-dir={repo}", *args], input=input, env=full_env, timeout=60).stdout.strip()


def source_files(root: Path, prefix: str = "") -> dict[str, tuple[str, Path]]:
    """{path in the repository: (mode, file)} of a source tree, without Python caches."""
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if "__pycache__" in rel.parts or path.suffix == ".pyc" or path.is_dir():
            continue
        if path.is_symlink() or not path.is_file():
            raise LabError(f"{path}: only regular files can go into a lab repository")
        files[prefix + rel.as_posix()] = ("100755" if os.access(path, os.X_OK) else "100644", path)
    return files


def write_commit(repo: Path, files: dict, message: str, date: int, parent: str | None = None, gitlinks=None) -> str:
    """The commit of exactly `files` ({path: (mode, Path or str content)}) and `gitlinks`
    ({path: commit}); its objects are written, no ref is moved. Same input, same sha."""
    on_disk = {path: (mode, src) for path, (mode, src) in files.items() if isinstance(src, Path)}
    listing = "".join(f"{src}\n" for mode, src in on_disk.values())
    shas = git(repo, "hash-object", "-w", "--no-filters", "--stdin-paths", input=listing).split()
    entries = [f"{mode} {sha}\t{path}" for (path, (mode, src)), sha in zip(on_disk.items(), shas)]
    for path, (mode, src) in files.items():
        if not isinstance(src, Path):
            entries.append(f"{mode} {git(repo, 'hash-object', '-w', '--no-filters', '--stdin', input=src)}\t{path}")
    entries += [f"160000 {sha}\t{path}" for path, sha in (gitlinks or {}).items()]
    with tempfile.TemporaryDirectory() as tmp:
        index = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
        git(repo, "update-index", "--add", "--index-info", input="\n".join(entries) + "\n", env=index)
        tree = git(repo, "write-tree", env=index)
    stamp = {"GIT_AUTHOR_DATE": f"{date} +0000", "GIT_COMMITTER_DATE": f"{date} +0000"}
    return git(repo, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message, env=stamp)


def revised_overlay(files: dict, prefix: str) -> dict:
    """`files` with OVERLAY_REVISION appended to the first Python file under `prefix`."""
    path = min(p for p in files if p.startswith(prefix) and p.endswith(".py"))
    mode, src = files[path]
    text = src.read_text()
    return {**files, path: (mode, text + ("" if text.endswith("\n") else "\n") + OVERLAY_REVISION)}


def ensure_git_repos(changes: list[str]) -> dict:
    """kit.git (submodule vendor/TensorFold -> TensorFold.git), TensorFold.git,
    profile.git (two commits) and recipe.git (the vLLM recipe) at the commits of the current lab/sim sources; writes
    commits.json and returns what it holds."""
    repos = {name: GIT_ROOT / f"{name}.git" for name in ("TensorFold", "kit", "profile", "recipe")}
    for repo in repos.values():
        if not (repo / "HEAD").exists():
            repo.parent.mkdir(parents=True, exist_ok=True)
            run(["git", "init", "-q", "--bare", "--initial-branch=main", str(repo)], env=dict(os.environ, **GIT_ENV))
        (repo / "git-daemon-export-ok").touch()
    engine = write_commit(
        repos["TensorFold"], source_files(sim_source("tensorfold")),
        "TensorFold: the lab's simulated engine (stdlib Python, CLI tensorfold)", GIT_DATES["tensorfold"],
    )  # fmt: skip
    kit = write_commit(
        repos["kit"], source_files(SIM / "kit"), "glm53-tensorfold-spark: lab simulator of the kit",
        GIT_DATES["kit"], gitlinks={"vendor/TensorFold": engine},
    )  # fmt: skip
    overlay = "tensorfold/patches/overlay/"
    profile_files = {**source_files(SIM / "profile"), **source_files(sim_source("profile-overlay"), prefix=overlay)}
    first = write_commit(
        repos["profile"], profile_files, "C8 profile and patches 9001-9004 (lab simulator)", GIT_DATES["profile-1"],
    )  # fmt: skip
    second = write_commit(
        repos["profile"], revised_overlay(profile_files, overlay), "patches: overlay revision (changes only the overlay)",
        GIT_DATES["profile-2"], parent=first,
    )  # fmt: skip
    recipe = write_commit(
        repos["recipe"], source_files(SIM / "recipe"), "glm-5.3-flash-2xdgx-spark-vllm: lab simulator of the vLLM recipe",
        GIT_DATES["recipe"],
    )  # fmt: skip
    for name, sha in (("TensorFold", engine), ("kit", kit), ("profile", second), ("recipe", recipe)):
        current = run(["git", f"--git-dir={repos[name]}", "rev-parse", "-q", "--verify", "refs/heads/main"], check=False)
        if current.stdout.strip() != sha:
            git(repos[name], "update-ref", "refs/heads/main", sha)
            changes.append(f"git: {name}.git main at {sha[:12]}")
    commits = {
        "server": GIT_URL,
        "kit": {"url": f"{GIT_URL}/kit.git", "commit": kit, "submodule": {"vendor/TensorFold": engine}},
        "tensorfold": {"url": f"{GIT_URL}/TensorFold.git", "commit": engine},
        "profile": {"url": f"{GIT_URL}/profile.git", "commit": second, "commits": [first, second]},
        "recipe": {"url": f"{GIT_URL}/recipe.git", "commit": recipe},
    }
    text = json.dumps(commits, indent=2) + "\n"
    if not GIT_COMMITS.is_file() or GIT_COMMITS.read_text() != text:
        GIT_COMMITS.write_text(text)
        changes.append(f"wrote {shown(GIT_COMMITS)}")
    return commits


def is_lab_git_daemon(pid, root: Path | None = GIT_ROOT) -> bool:
    """Whether `pid` is a lab git daemon on GIT_HOST (serving `root`; any checkout's if None)."""
    argv = process_argv(pid)
    if not argv or not argv[0].endswith(b"git-daemon") or f"--listen={GIT_HOST}".encode() not in argv:
        return False
    base = next((a[len(b"--base-path="):].decode() for a in argv if a.startswith(b"--base-path=")), "")
    return re.search(r"lab/\.state(-[0-9]+)?/git$", base) is not None if root is None else base == str(root)


def git_daemon_pid() -> int | None:
    return pid_in(GIT_PID, is_lab_git_daemon)


def git_served(commits: dict) -> bool:
    """The daemon answers and serves kit.git at the recorded commit."""
    proc = run(["git", "ls-remote", commits["kit"]["url"], "refs/heads/main"], check=False, timeout=15,
               env=dict(os.environ, **GIT_ENV))  # fmt: skip
    return proc.returncode == 0 and proc.stdout.split()[:1] == [commits["kit"]["commit"]]


def stop_git_server() -> bool:
    """Stop this checkout's git daemon (by its pid file); True when one ran."""
    return stop_pid_file(GIT_PID, is_lab_git_daemon)


def ensure_git_server(changes: list[str]) -> dict:
    """The repositories at the current sources, served read-only (git daemon: fetch only) at
    git://198.18.0.1/<name>.git; (re)started when dead or not serving them. Needs the mgmt
    network (its gateway address)."""
    commits = ensure_git_repos(changes)
    pid = git_daemon_pid()
    if pid is not None and git_served(commits):
        return commits
    stop_git_server()
    # One lab N per machine: a daemon another checkout of the lab left on the address (in this
    # namespace, so of the same lab number) goes.
    for other in (int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()):
        # Another lab's daemon (labs 2+, netns.py) holds the address in its own namespace.
        if is_lab_git_daemon(other, root=None) and same_netns(other):
            log(f"stopping the lab git daemon of another checkout (pid {other})")
            terminate(other)
    exec_path = run(["git", "--exec-path"]).stdout.strip()
    cmd = [
        f"{exec_path}/git-daemon", f"--listen={GIT_HOST}", f"--port={GIT_PORT}", "--reuseaddr",
        f"--base-path={GIT_ROOT}", "--informative-errors", "--verbose", str(GIT_ROOT),
    ]  # fmt: skip
    log(f"starting the lab git server at {GIT_URL} (log: {GIT_LOG})")
    proc = start_server(cmd, GIT_LOG, GIT_PID, env=dict(os.environ, **GIT_ENV))
    if wait_ready(proc, lambda: git_served(commits), 20, 0.2, "git daemon", GIT_LOG, 10):
        changes.append(f"{'restarted' if pid else 'started'} the lab git server at {GIT_URL}")
        return commits
    raise LabError(f"the lab git daemon (pid {proc.pid}) does not serve {GIT_URL}/kit.git; see {GIT_LOG}")


def git_server_status() -> tuple[bool, str]:
    pid = git_daemon_pid()
    if pid is None:
        return False, f"git server: not running (`make lab-up` starts it at {GIT_URL})"
    try:
        commits = json.loads(GIT_COMMITS.read_text())
    except (OSError, ValueError):
        return False, f"git server: pid {pid}, but no {shown(GIT_COMMITS)} (`make lab-up`)"
    if not git_served(commits):
        return False, f"git server: pid {pid} does not serve {GIT_URL}/kit.git at {commits['kit']['commit'][:12]} (log: {GIT_LOG})"
    return True, f"git server: healthy, pid {pid} at {GIT_URL} (kit {commits['kit']['commit'][:12]}, profile {commits['profile']['commit'][:12]})"
