"""The demo's step runner: each step runs a project tool in a subprocess and keeps its result.

A step's result is stored in `<output_dir>/<key>/result.json` once it succeeds, and reused by the next run
(`--restart` starts over); a tool's progress lines are echoed, its whole output kept in the step's log.
"""

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
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


def run_tool(module, log_path, *args, env=None):
    """Runs `python -m module args...`, echoing its progress lines and keeping a log."""
    command = [sys.executable, "-m", module, *args]
    print(f"    $ python -m {module} {' '.join(args)}", flush=True)
    with open(log_path, "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO_ROOT, env=env
        )
        for line in process.stdout:
            log.write(line)
            if line.strip() and not _NOISE.search(line):
                print("    " + _ABSL_PREFIX.sub("", line.rstrip()), flush=True)
        returncode = process.wait()
    if returncode != 0:
        with open(log_path, encoding="utf-8") as log:
            tail = "".join(log.readlines()[-30:])
        raise RuntimeError(f"python -m {module} failed with exit code {returncode}; log: {log_path}\n{tail}")


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
