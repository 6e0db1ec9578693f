"""finish(): how every module of the collection ends, on a stand-in for AnsibleModule that
records what it is told (exit_json and fail_json end the process in Ansible: here they raise)."""

import pytest

from ansible_collections.dgx_spark.glm53.plugins.module_utils._module_exit import finish


class Ended(Exception):
    pass


class Module:
    def __init__(self):
        self.warned, self.ended = [], None

    def warn(self, text):
        self.warned.append(text)

    def exit_json(self, **result):
        self.ended = ("exit", result)
        raise Ended()

    def fail_json(self, **result):
        self.ended = ("fail", result)
        raise Ended()


class UserError(Exception):
    def __init__(self, msg, result=None):
        super().__init__(msg)
        if result is not None:
            self.result = result


def run(call):
    module = Module()
    with pytest.raises(Ended):
        finish(module, call, UserError)
    return module


def test_the_result_is_returned_and_its_warnings_are_warned():
    module = run(lambda: {"changed": True, "warnings": ["w1", "w2"], "bytes": 3})
    assert module.ended == ("exit", {"changed": True, "bytes": 3})
    assert module.warned == ["w1", "w2"]


def test_a_user_error_fails_with_its_message_and_the_result_it_carries():
    def call():
        raise UserError("no such path: /x", result={"changed": False, "warnings": ["half done"], "files": 1})
    module = run(call)
    assert module.ended == ("fail", {"msg": "no such path: /x", "changed": False, "files": 1})
    assert module.warned == ["half done"]


def test_a_user_error_without_a_result_fails_with_the_message_alone():
    def call():
        raise UserError("bad")
    assert run(call).ended == ("fail", {"msg": "bad"})


def test_any_other_exception_is_not_a_user_error():
    with pytest.raises(ZeroDivisionError):
        finish(Module(), lambda: 1 // 0, UserError)
