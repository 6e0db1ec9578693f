"""End-to-end harness on the Spark lab (lab/README.md).

Fixtures:
  lab            session: brings the two-node lab up once (same code as `make lab-up`)
  lab4           session: the four-node lab (spark-head, spark-worker, spark-worker-2,
                 spark-worker-3); back to two nodes when the session ends
  run_playbook   run_playbook(playbook, extravars=None, limit=None, tags=None,
                 ident=None, expect_success=True, inventory=None, secret_vars=None) -> RunResult, through
                 ansible_runner.run with the layout of runner/ (what operators copy);
                 inventory defaults to the two-node lab/inventory (pass lab4.inventory)
  assert_idempotent  assert_idempotent(playbook, **kw): two runs, second changes nothing

Every run keeps its private data dir and artifacts under tests/output/runner/<ident>.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# lab/ is not a package and never ships: import the lab tool from its folder
# (lab_faults.py and benchmarks/preflight.py do the same).
sys.path.insert(0, str(REPO / "lab"))
import spark_lab  # noqa: E402  pylint: disable=wrong-import-position

RUNNER_TEMPLATE = REPO / "runner"
# Lab 2 (`spark_lab.py --lab 2 run -- pytest ...`, beside lab 1's session): its own folder.
OUTPUT = REPO / "tests" / "output" / ("runner" if spark_lab.LAB_ID == 1 else f"runner-lab{spark_lab.LAB_ID}")


# A test's limit, fixtures included: the longest (a cold deploy with image builds, about
# 3 minutes on a 2-core machine) several times over. pytest.ini's 120 s is for unit tests.
LAB_TEST_TIMEOUT = 900


def pytest_collection_modifyitems(items):
    # Everything under tests/integration needs the lab: mark it so `-m "not lab"` skips it.
    here = Path(__file__).parent
    for item in items:
        if here in Path(item.path).parents:
            item.add_marker(pytest.mark.lab)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(LAB_TEST_TIMEOUT))


@pytest.fixture(scope="session")
def lab():
    """The running two-node lab: inventory path, nodes, `exec` into a node as root."""
    return spark_lab.up(nodes=2)


@pytest.fixture(scope="module", autouse=True)
def lab_baseline(lab):
    """Every module starts from the lab's baseline and leaves it there (lab/baseline.py):
    no fault left by a killed run, no engine container, no cluster contract, no kit state,
    daemon.json as lab-up writes it. Weights, images and the deploy user's venv stay (a
    cache, as on a Spark that served before)."""
    spark_lab.reset()
    yield
    spark_lab.reset()


@pytest.fixture(scope="module")
def lab4(lab):
    """The four-node lab (one head, three workers on the same link subnets) for one module:
    the two extra workers are removed when the module ends (tests on the two-node
    inventory do not see them meanwhile)."""
    yield spark_lab.up(nodes=4)
    spark_lab.up(nodes=2)


class RunResult:
    """One ansible-runner run, with its events read into memory once (runner's
    `events` is a generator that can only be consumed once)."""

    def __init__(self, runner, ident: str, playbook: str, artifact_dir: Path):
        self.ident = ident
        self.playbook = playbook
        self.artifact_dir = artifact_dir
        self.status = runner.status
        self.rc = runner.rc
        self.stats = runner.stats or {}
        self.events = list(runner.events)
        stdout_file = artifact_dir / "stdout"
        self.stdout = stdout_file.read_text(errors="replace") if stdout_file.exists() else ""

    # stats is {"ok": {host: n}, "changed": {...}, "failures": {...}, "dark": {...}, ...}
    def _stat(self, key: str) -> dict:
        return self.stats.get(key) or {}

    @property
    def changed_total(self) -> int:
        return sum(self._stat("changed").values())

    def failed_tasks(self) -> list[dict]:
        """Failed and unreachable results, ignoring those the play itself ignored."""
        out = []
        for ev in self.events:
            if ev.get("event") not in ("runner_on_failed", "runner_on_unreachable"):
                continue
            data = ev.get("event_data", {})
            if data.get("ignore_errors"):
                continue
            res = data.get("res", {}) or {}
            out.append(
                {
                    "host": data.get("host"),
                    "task": data.get("task"),
                    "msg": res.get("msg") or res.get("stderr") or res.get("reason", ""),
                    "result": res,
                }
            )
        return out

    def task_results(self, task_name: str) -> dict:
        """{host: result dict} of the task named `task_name` (last result per host;
        loop items are in result["results"] as Ansible reports them)."""
        out = {}
        for ev in self.events:
            if ev.get("event") not in (
                "runner_on_ok",
                "runner_on_failed",
                "runner_on_skipped",
                "runner_on_unreachable",
            ):
                continue
            data = ev.get("event_data", {})
            if data.get("task") == task_name:
                res = dict(data.get("res", {}) or {})
                res.setdefault("_event", ev["event"])
                out[data.get("host")] = res
        return out

    def task_seconds(self, task_name: str, host: str) -> float:
        """How long `task_name` ran on `host`, as Ansible's callback timed it (the event's
        own duration): a bound on it leaves out Ansible's start-up and the other tasks."""
        for ev in reversed(self.events):
            data = ev.get("event_data", {})
            if (ev.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable")
                    and data.get("task") == task_name and data.get("host") == host):
                return float(data["duration"])
        raise AssertionError(f"no result of task {task_name!r} on {host} in {self.artifact_dir}")

    def slowest_task(self, host: str) -> tuple[str, float]:
        """(task name, seconds) of the longest-running task on `host` in this run."""
        timed = [(ev["event_data"].get("task"), float(ev["event_data"]["duration"])) for ev in self.events
                 if ev.get("event") in ("runner_on_ok", "runner_on_failed", "runner_on_unreachable")
                 and ev.get("event_data", {}).get("host") == host]
        return max(timed, key=lambda t: t[1]) if timed else ("", 0.0)

    def _summary(self) -> str:
        tail = "\n".join(self.stdout.splitlines()[-60:])
        failed = json.dumps(
            [{k: f[k] for k in ("host", "task", "msg")} for f in self.failed_tasks()],
            indent=1,
            default=str,
        )
        return (
            f"{self.playbook} (ident {self.ident}): status={self.status} rc={self.rc}\n"
            f"stats={json.dumps(self.stats, default=str)}\nfailed={failed}\n"
            f"artifacts: {self.artifact_dir}\n--- last stdout lines ---\n{tail}"
        )

    def assert_success(self) -> "RunResult":
        # Gate on all of status, rc and stats: runner's status alone has lied before.
        ok = (
            self.status == "successful"
            and self.rc == 0
            and not any(self._stat("failures").values())
            and not any(self._stat("dark").values())
        )
        assert ok, "playbook run failed:\n" + self._summary()
        return self

    def assert_failed(self) -> "RunResult":
        assert self.status == "failed" and self.rc != 0, "playbook run was expected to fail:\n" + self._summary()
        return self


class PlaybookRunner:
    """Callable behind the `run_playbook` fixture."""

    _counter = itertools.count(1)

    def __init__(self, inventory: Path, default_ident: str):
        self.inventory = inventory
        self.default_ident = default_ident

    def _ident(self, ident: str | None) -> str:
        base = re.sub(r"[^A-Za-z0-9_.-]+", "_", ident or self.default_ident)[:100]
        return f"{base}-{next(self._counter):03d}"

    def __call__(
        self,
        playbook,
        extravars=None,
        limit=None,
        tags=None,
        ident=None,
        expect_success=True,
        cmdline=None,
        verbosity=0,
        inventory=None,
        secret_vars=None,
    ) -> RunResult:
        import ansible_runner  # only integration runs need it

        playbook_path = Path(playbook)
        if playbook_path.is_absolute():
            playbook_path = playbook_path.relative_to(REPO)
        assert (REPO / playbook_path).is_file(), f"no such playbook: {playbook_path}"

        run_id = self._ident(ident)
        private = OUTPUT / run_id
        if private.exists():
            shutil.rmtree(private)
        # Same layout as runner/: env/ copied, project is the checkout, inventory the lab's
        # (`inventory` may be a path or a Lab, e.g. lab4).
        shutil.copytree(RUNNER_TEMPLATE / "env", private / "env")
        if secret_vars:
            # As an operator keeps secrets with ansible-runner: in env/extravars, which runner
            # passes as -e @file. (Extravars given to the API are echoed on the command line.)
            import yaml  # pylint: disable=import-outside-toplevel
            extravars_file = private / "env" / "extravars"
            merged = dict(yaml.safe_load(extravars_file.read_text()) or {}) if extravars_file.exists() else {}
            merged.update(secret_vars)
            extravars_file.write_text(yaml.safe_dump(merged))

        args = []
        if tags:
            args += ["--tags", tags if isinstance(tags, str) else ",".join(tags)]
        if cmdline:
            args.append(cmdline)

        envvars = {
            "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
            # ansible-playbook from the same venv as pytest, whatever PATH says.
            "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""),
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_NOCOLOR": "1",
        }
        runner = ansible_runner.run(
            private_data_dir=str(private),
            project_dir=str(REPO),
            playbook=str(playbook_path),
            inventory=str(getattr(inventory, "inventory", inventory) or self.inventory),
            extravars=extravars or {},
            envvars=envvars,
            limit=limit,
            cmdline=" ".join(args) or None,
            ident="run",
            artifact_dir=str(private / "artifacts"),
            quiet=True,
            verbosity=verbosity,
        )
        result = RunResult(runner, run_id, str(playbook_path), private / "artifacts" / "run")
        if expect_success:
            result.assert_success()
        return result

    def assert_idempotent(self, playbook, **kw) -> tuple[RunResult, RunResult]:
        ident = kw.pop("ident", None) or self.default_ident
        first = self(playbook, ident=f"{ident}-first", **kw)
        second = self(playbook, ident=f"{ident}-idem", **kw)
        changed = {h: n for h, n in second._stat("changed").items() if n}
        assert not changed, (
            f"second run of {playbook} changed {changed}:\n"
            + "\n".join(
                f"  {ev['event_data'].get('host')}: {ev['event_data'].get('task')}"
                for ev in second.events
                if ev.get("event") == "runner_on_ok" and ev.get("event_data", {}).get("res", {}).get("changed")
            )
            + f"\nartifacts: {second.artifact_dir}"
        )
        return first, second


@pytest.fixture
def run_playbook(lab, request):
    return PlaybookRunner(Path(lab.inventory), request.node.name)


@pytest.fixture
def assert_idempotent(run_playbook):
    return run_playbook.assert_idempotent
