"""The demo's step runner: each step runs a project tool in a subprocess and keeps its result.

A step's result is stored in `<output_dir>/<key>/result.json` once it succeeds, and reused by the next run
(`--restart` starts over); a tool's progress lines are echoed, its whole output kept in the step's log.
"""

import dataclasses
import json
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

from bert_tf import file_io

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@dataclasses.dataclass
class StepResult:
    name: str
    key: str
    seconds: float
    summary: str


# Lines of the tools' output not worth showing (the full output is in each step's log).
_NOISE = re.compile(
    r"functional_saver|Sharding callback|UserWarning|warnings.warn|DeprecationWarning|"
    r"unsupported characters which will be renamed|Assets written to|Writing fingerprint|"
    r"signature_serialization|oneDNN supports DT_INT64 only"
)


_ABSL_PREFIX = re.compile(r"^[IWEF]\d{4} [\d:.]+\s+\d+ [\w.]+:\d+\] ")


def run_tool(module, log_path, *args, env=None, time_limit_seconds=3600.0, exit_grace_seconds=10.0):
    """Runs `python -m module args...`, echoing its progress lines and keeping a log.

    Every wait is bounded: the tool (with any process it started) is killed once it has run
    `time_limit_seconds`, and, after it exits, its output is read for at most `exit_grace_seconds` more (a
    process it left behind may hold the pipe open; it is killed then). Either is a RuntimeError, as is a
    non-zero exit status.
    """
    command = [sys.executable, "-m", module, *args]
    print(f"    $ python -m {module} {' '.join(args)}", flush=True)
    # Its own process group, so that a time-out or an interrupt here ends whatever the tool started too.
    process = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=REPO_ROOT,
        env=env,
        start_new_session=True,
    )
    lines = queue.Queue()
    threading.Thread(target=_read_lines, args=(process.stdout, lines), daemon=True).start()
    deadline = time.monotonic() + time_limit_seconds
    exited_at = None
    failure = None
    try:
        with open(log_path, "w", encoding="utf-8") as log:
            while True:
                try:
                    line = lines.get(timeout=0.5)
                except queue.Empty:
                    line = ""
                if line is None:
                    break
                log.write(line)
                if line.strip() and not _NOISE.search(line):
                    print("    " + _ABSL_PREFIX.sub("", line.rstrip()), flush=True)
                # Checked after every line too: a tool that never stops printing is still stopped.
                now = time.monotonic()
                if exited_at is None and process.poll() is not None:
                    exited_at = now
                if exited_at is not None and now - exited_at > exit_grace_seconds:
                    break  # it exited, but something it started still holds its output open
                if now > deadline:
                    failure = f"python -m {module} ran past its time limit of {time_limit_seconds:.0f} s"
                    break
    finally:
        _kill_group(process)
    returncode = process.wait(timeout=60)
    if failure is None and returncode != 0:
        failure = f"python -m {module} failed with exit code {returncode}"
    if failure is not None:
        with open(log_path, encoding="utf-8") as log:
            tail = "".join(log.readlines()[-30:])
        raise RuntimeError(f"{failure}; log: {log_path}\n{tail}")


def _read_lines(stream, lines):
    for line in stream:
        lines.put(line)
    lines.put(None)


def _kill_group(process):
    """Kills the tool's process group (the tool, if still running, and every process it left behind)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is gone: nothing left to stop


class Step:
    """A demo step whose result is stored in `<output_dir>/<key>/result.json` once it succeeds."""

    def __init__(self, output_dir, key):
        self.key = key
        self.dir = os.path.join(output_dir, key)
        self.result_path = os.path.join(self.dir, "result.json")

    def load(self):
        with open(self.result_path, encoding="utf-8") as f:
            return json.load(f)

    def run(self, title, work, describe):
        """Runs `work(step_dir) -> result dict` unless already done; returns (result, StepResult)."""
        print(f"\n== {title}", flush=True)
        if os.path.exists(self.result_path):
            result = self.load()
            print(f"   reusing {self.dir} (pass --restart to rebuild)")
        else:
            if os.path.exists(self.dir):
                shutil.rmtree(self.dir)
            os.makedirs(self.dir)
            start = time.time()
            result = work(self.dir)
            result["seconds"] = time.time() - start
            file_io.write_json(self.result_path, result)
        summary = describe(result)
        print(f"-> {title}: {summary} ({result['seconds']:.0f} s)", flush=True)
        return result, StepResult(title, self.key, result["seconds"], summary)
