"""A module's real AnsiballZ payload, run again without ansible's controller.

The module tests run `ansible localhost -c local -m dgx_spark.glm53.<module> -a ARGS` with the
JSON callback. Of the about 1 s of CPU each run costs, the module itself is about 0.1 s: the
rest is ansible's start, its inventory, a forked worker and the payload's build, paid again for
every call (the unit stage made about 200 such calls). `run(command, ...)` takes the command a
test built and answers as `subprocess.run` would, with the JSON callback's report on stdout:

- the first call for a module and interpreter in this process is that command, run by real
  ansible, with the payload it sent kept (ANSIBLE_KEEP_REMOTE_FILES, pipelining off);
- every later call runs that same payload (the zip of the module and its module_utils that
  ansible ships to a node, under the interpreter ansible chose) with the call's arguments, check
  and diff mode written into its params where ansible wrote them, in the command's working
  directory and environment, and reports the module's result as ansible's controller does
  (``changed`` false when absent, warnings as their messages; a payload that printed no JSON
  fails as it does under ansible).

What the controller alone does is not repeated here, so a test of it keeps real ansible: a
command this module does not understand (another option, no JSON callback: the text an
operator reads) runs unchanged; so does any module with an action plugin (the controller half
of it would be skipped). Pure standard library: the tests' interpreter is ansible's.
"""

import ast
import json
import os
import re
import shutil
import subprocess
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
ACTIONS = os.path.join(REPO, "plugins", "action")
_PARAMS = re.compile(r"^params=(?P<literal>'.*'),$", re.M)
_SHEBANG = re.compile(r"^#!(?P<python>\S+)")
# (module, interpreter option or None) -> (payload text, interpreter, internal params)
_PAYLOADS = {}


def _parse(command):
    """(module, JSON args, check, diff, interpreter option) of an ad hoc command line, or None
    when it holds anything else."""
    args = list(command[1:])
    if args[:1] != ["localhost"]:
        return None
    args = args[1:]
    module = module_args = interpreter = None
    check = diff = listed = False
    while args:
        flag = args.pop(0)
        if flag == "-i" and args and args[0] == "localhost,":
            args.pop(0)
            listed = True
        elif flag == "-c" and args and args[0] == "local":
            args.pop(0)
        elif flag == "-e" and args and args[0].startswith("ansible_python_interpreter="):
            interpreter = args.pop(0)
        elif flag == "-m" and args:
            module = args.pop(0)
        elif flag == "-a" and args:
            module_args = args.pop(0)
        elif flag == "--check":
            check = True
        elif flag == "--diff":
            diff = True
        else:
            return None
    if not module or not module.startswith("dgx_spark.glm53.") or module_args is None:
        return None
    # A listed localhost without an interpreter discovers one on every run, and reports it.
    if listed and interpreter is None:
        return None
    if os.path.exists(os.path.join(ACTIONS, module.rsplit(".", 1)[1] + ".py")):
        return None
    try:
        module_args = json.loads(module_args)
    except ValueError:
        return None
    return module, module_args, check, diff, interpreter


def _capture(command, env, cwd, timeout):
    """Run `command` with real ansible, keeping the payload it sent: (process, payload or None)."""
    kept = tempfile.mkdtemp(prefix="glm53-ansiballz-")
    try:
        proc = subprocess.run(command, cwd=cwd, timeout=timeout, capture_output=True, text=True, check=False,
                              env=dict(env, ANSIBLE_KEEP_REMOTE_FILES="1", ANSIBLE_PIPELINING="0",
                                       ANSIBLE_REMOTE_TMP=kept))
        found = [os.path.join(root, name) for root, _dirs, names in os.walk(kept)
                 for name in names if name.startswith("AnsiballZ_") and name.endswith(".py")]
        if len(found) != 1:
            return proc, None
        with open(found[0], encoding="utf-8") as handle:
            text = handle.read()
    finally:
        shutil.rmtree(kept, ignore_errors=True)
    params, python = _PARAMS.search(text), _SHEBANG.match(text)
    if params is None or python is None:
        return proc, None
    internal = {key: value for key, value in json.loads(ast.literal_eval(params.group("literal")))
                ["ANSIBLE_MODULE_ARGS"].items() if key.startswith("_ansible_")}
    return proc, (text, python.group("python"), internal)


def _report(result):
    return json.dumps({"plays": [{"tasks": [{"hosts": {"localhost": result}}]}]})


def _as_the_controller_reports(result, module):
    """The module's result as ansible's controller and JSON callback report it: ``changed``
    false when absent, warnings as their messages."""
    result.setdefault("changed", False)
    result.setdefault("_ansible_no_log", False)
    result.setdefault("action", module)
    if result.get("warnings"):
        result["warnings"] = [w["event"]["msg"] if isinstance(w, dict) and "event" in w else w for w in result["warnings"]]


def _run_payload(payload, module, module_args, check, diff, env, cwd, timeout):
    text, python, internal = payload
    tmpdir = tempfile.mkdtemp(prefix="glm53-ansiballz-")
    try:
        params = dict(module_args)
        params.update(internal, _ansible_check_mode=check, _ansible_diff=diff, _ansible_keep_remote_files=False,
                      _ansible_tmpdir=tmpdir + "/", _ansible_remote_tmp=tmpdir)
        literal = repr(json.dumps({"ANSIBLE_MODULE_ARGS": params}))
        script = os.path.join(tmpdir, "AnsiballZ_module.py")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write(_PARAMS.sub(lambda _m: "params=%s," % literal, text, count=1))
        proc = subprocess.run([python, script], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                              check=False)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    try:
        result = json.loads(proc.stdout)
    except ValueError:
        result = {"failed": True, "msg": "Module result deserialization failed: No start of json char found",
                  "module_stdout": proc.stdout, "module_stderr": proc.stderr, "rc": proc.returncode}
    _as_the_controller_reports(result, module)
    failed = bool(result.get("failed")) or proc.returncode != 0
    if failed:
        result["failed"] = True
        result.setdefault("exception", "(traceback unavailable)")
    return subprocess.CompletedProcess(proc.args, 2 if failed else 0, _report(result), proc.stderr)


def run(command, *, env, cwd, timeout=300, **_ignored):
    """`subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True)` for an ad hoc
    `ansible localhost ... -m dgx_spark.glm53.<module> -a JSON` with the JSON callback, the
    payload of the first such call replayed for the later ones (see the module's docstring)."""
    parsed = _parse(command) if env.get("ANSIBLE_STDOUT_CALLBACK") == "json" else None
    if parsed is None:
        return subprocess.run(command, cwd=cwd, env=env, timeout=timeout, capture_output=True, text=True, check=False)
    module, module_args, check, diff, interpreter = parsed
    payload = _PAYLOADS.get((module, interpreter))
    if payload is None:
        proc, payload = _capture(command, env, cwd, timeout)
        if payload is not None:
            _PAYLOADS[(module, interpreter)] = payload
        return proc
    return _run_payload(payload, module, module_args, check, diff, env, cwd, timeout)
