"""Ctrl-C (a real SIGINT to the command) while the judge works: the verdicts written so far stay,
the verdicts in flight are waited for and kept, the command exits 130 naming how to resume, and
the rerun asks only what is missing."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
import time

from tests.fixtures.cli import clean_env
from tests.fixtures.compare import stage_compare

DEADLINE = 30.0
OUTCOMES = {f"q{i:02d}": ("error" if i == 5 else "win") for i in range(10)}


def _lines(path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def test_ctrl_c_while_judging_keeps_verdicts_and_the_rerun_completes(project, fake_provider, tmp_path):
    project.write(pipeline={"concurrency": 2})
    staged = stage_compare(project, OUTCOMES)
    gate = threading.Event()
    quick = {"q00", "q01", "q02"}

    def judge(req):
        answer = staged.judge(req)
        if not any(f"number {q[1:]}?" in req.prompt for q in quick):
            gate.wait(DEADLINE)  # every other verdict hangs until the test lets it go
        return answer

    fake_provider.responder = judge
    home = tmp_path / "home"
    home.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "overbrainer", "-C", str(project.dir), "compare",
                             "--rejudge", staged.compare_id], env=clean_env(project.env, home),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        end = time.monotonic() + DEADLINE
        files = []
        while time.monotonic() < end:
            files = list(staged.compare_dir.glob("verdicts-*.jsonl"))
            # 4 lines = the child's error (q05, written first) + the 3 quick verdicts;
            # 5 requests = those 3 + 2 hanging in flight (concurrency 2).
            if files and len(_lines(files[0])) >= 4 and len(fake_provider.chat_requests()) >= 5:
                break
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.01)
        else:
            raise AssertionError("the judge did not get going")
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True)
        reader.start()
        proc.send_signal(signal.SIGINT)
        while not any("waiting up to 30 s for 2 request(s) in flight" in line for line in list(lines)):
            assert time.monotonic() < end + DEADLINE and proc.poll() is None, lines
            time.sleep(0.01)
        gate.set()  # the two verdicts in flight come back during the grace
        proc.wait(timeout=DEADLINE)
        reader.join(DEADLINE)
        err = "".join(lines)
    finally:
        gate.set()
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert f"the verdicts so far are kept; resume with `overbrainer compare --rejudge {staged.compare_id}`" in err
    kept = _lines(files[0])
    assert sorted(v["id"] for v in kept) == ["q00", "q01", "q02", "q03", "q04", "q05"]  # q03, q04 were in flight
    assert not (staged.compare_dir / "compare.json").exists()

    fake_provider.clear()
    fake_provider.responder = staged.judge
    r = subprocess.run([sys.executable, "-m", "overbrainer", "-C", str(project.dir), "compare", "--rejudge",
                        staged.compare_id], env=clean_env(project.env, home), capture_output=True, text=True,
                       timeout=DEADLINE * 2)
    assert r.returncode == 0, r.stderr
    asked = sorted(int(r.prompt.split("number ")[1][:2]) for r in fake_provider.chat_requests())
    assert asked == [6, 7, 8, 9]  # only what the file missed
    final = _lines(files[0])
    assert sorted(v["id"] for v in final) == sorted(OUTCOMES)  # each question exactly once
    assert staged.compare_json["summary"]["wins"] == 9
