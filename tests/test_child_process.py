"""bert_tf.child_process: the result or the exception comes back; a child that dies is an error, not a hang."""

import os

import pytest

from bert_tf.child_process import run_in_child_process


def test_returns_the_childs_result_computed_in_another_process():
    assert run_in_child_process(os.getpid, description="pid") != os.getpid()
    assert run_in_child_process(divmod, 17, 5, description="divmod") == (3, 2)


def test_reraises_the_childs_exception():
    with pytest.raises(ValueError, match="invalid literal"):
        run_in_child_process(int, "not a number", description="parse")


def test_a_child_that_dies_without_an_answer_is_an_error_naming_its_status():
    with pytest.raises(RuntimeError, match="exit_for_test: its child process exited with status 3"):
        run_in_child_process(os._exit, 3, description="exit_for_test")


def _variables(*names):
    return [os.environ.get(name) for name in names]


def test_the_child_gets_the_extra_environment_and_the_parent_keeps_its_own(monkeypatch):
    monkeypatch.setenv("BERT_TF_TEST_KEPT", "parent")
    monkeypatch.delenv("BERT_TF_TEST_ADDED", raising=False)
    environment = {"BERT_TF_TEST_ADDED": "child", "BERT_TF_TEST_KEPT": "child"}
    seen = run_in_child_process(
        _variables, "BERT_TF_TEST_ADDED", "BERT_TF_TEST_KEPT", description="environment", environment=environment
    )
    assert seen == ["child", "child"]
    assert os.environ["BERT_TF_TEST_KEPT"] == "parent" and "BERT_TF_TEST_ADDED" not in os.environ
