"""The demo's step runner never waits without a bound (experiments/demo/runner.py)."""

import os
import textwrap
import time

import pytest

from experiments.demo.runner import run_tool


def _tool(tmp_path, name, body):
    (tmp_path / f"{name}.py").write_text(textwrap.dedent(body), encoding="utf-8")
    return dict(os.environ, PYTHONPATH=str(tmp_path))


def _gone(pid, within_seconds=10.0):
    """True once `pid` has exited (reaped, or a zombie nobody reaped yet): a killed process takes a moment."""
    deadline = time.monotonic() + within_seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                if f.read().rsplit(")", 1)[1].split()[0] in ("Z", "X"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


def test_a_tool_that_hangs_is_stopped_at_its_time_limit(tmp_path):
    env = _tool(
        tmp_path,
        "hanging_tool",
        f"""
        import os, time
        open({str(tmp_path / "pid")!r}, "w").write(str(os.getpid()))
        print("started", flush=True)
        time.sleep(600)
        """,
    )
    with pytest.raises(RuntimeError, match="ran past its time limit of 3 s"):
        run_tool("hanging_tool", str(tmp_path / "tool.log"), env=env, time_limit_seconds=3)
    if (tmp_path / "pid").exists():
        assert _gone(int((tmp_path / "pid").read_text()))


def test_a_tool_that_never_stops_printing_is_stopped_at_its_time_limit(tmp_path):
    env = _tool(
        tmp_path,
        "chatty_tool",
        "import time\nwhile True:\n    print('still going', flush=True)\n    time.sleep(0.01)\n",
    )
    with pytest.raises(RuntimeError, match="ran past its time limit of 3 s"):
        run_tool("chatty_tool", str(tmp_path / "tool.log"), env=env, time_limit_seconds=3)


def test_a_process_left_holding_the_output_does_not_keep_the_demo_waiting(tmp_path):
    env = _tool(
        tmp_path,
        "leaving_tool",
        f"""
        import subprocess, sys
        left = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        open({str(tmp_path / "pid")!r}, "w").write(str(left.pid))
        print("done", flush=True)
        """,
    )
    run_tool("leaving_tool", str(tmp_path / "tool.log"), env=env, time_limit_seconds=300, exit_grace_seconds=1)
    assert "done" in (tmp_path / "tool.log").read_text()
    assert _gone(int((tmp_path / "pid").read_text()))


def test_a_failing_tool_is_an_error_with_its_log(tmp_path):
    env = _tool(tmp_path, "failing_tool", "import sys\nprint('bad input: x.txt', flush=True)\nsys.exit(2)\n")
    with pytest.raises(RuntimeError, match=r"(?s)failed with exit code 2.*bad input: x\.txt"):
        run_tool("failing_tool", str(tmp_path / "tool.log"), env=env)
