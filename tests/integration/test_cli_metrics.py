"""Prometheus metrics end to end: the real command scraped over HTTP while it runs, and the textfile
it leaves, parsed with prometheus_client's parser and checked against history.jsonl and
metrics.jsonl."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.cli import clean_env
from tests.fixtures.provider import Fault
from tests.integration.test_runs_support import make_project

PRICES = {"deepseek/deepseek-r1": (1.0, 2.0), "qwen/qwen3-235b": (0.5, 0.5)}


def samples(text: str, project: str = "demo") -> dict:
    """{(sample name, labels as a sorted tuple): value}; every series is the project's (its
    `project` label checked, then left out)."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            assert s.labels.pop("project") == project, s
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def scrape(url: str, project: str = "demo") -> dict:
    with urllib.request.urlopen(url, timeout=10) as r:
        return samples(r.read().decode(), project)


def wait_until(check, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


class Command:
    """A command running in the background, its stderr in a file (read while it runs)."""

    def __init__(self, argv, env, tmp_path):
        self.err_path = tmp_path / "stderr.log"
        self._err = open(self.err_path, "w")
        self.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=self._err, text=True)

    def stderr(self) -> str:
        return self.err_path.read_text()

    def metrics_url(self) -> str:
        def found():
            m = re.search(r"metrics at (http://\S+/metrics)", self.stderr())
            assert self.proc.poll() is None or m, self.stderr()
            return m and m.group(1)
        return wait_until(found, "the `metrics at` line")

    def finish(self, timeout: float = 60) -> tuple[int, str, str]:
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            self._err.close()
        return self.proc.returncode, out, self.stderr()


def from_history(history: list[dict]) -> dict:
    """What the counters must show for these history lines (labels as `samples` gives them)."""
    out: dict = {}

    def add(key, n):
        out[key] = out.get(key, 0) + n

    for h in history:
        for result in ("done", "skipped", "failed", "excluded"):
            add(("overbrainer_stage_items_total", (("result", result), ("stage", h["stage"]))), h[result])
        model = h["model"] or "unknown"
        for direction, field in (("in", "input_tokens"), ("out", "output_tokens")):
            if h[field]:
                add(("overbrainer_tokens_total", (("direction", direction), ("model", model), ("stage", h["stage"]))),
                    h[field])
        if h["cost"] is not None:
            add(("overbrainer_cost_usd_total", (("model", model), ("stage", h["stage"]))), h["cost"])
    return out


def counters(got: dict) -> dict:
    return {k: v for k, v in got.items()
            if k[0] in ("overbrainer_stage_items_total", "overbrainer_tokens_total", "overbrainer_cost_usd_total")
            and (v or k[0] != "overbrainer_stage_items_total")}


def assert_counters_equal(got: dict, expected: dict) -> None:
    got, expected = counters(got), {k: v for k, v in expected.items() if v}
    assert set(got) == set(expected)
    for key, value in expected.items():
        assert abs(got[key] - value) < 1e-9, (key, got[key], value)


def test_an_answers_run_scraped_while_it_runs_then_its_textfile_equals_history(project, fake_provider, cli,
                                                                                tmp_path):
    project.write(topics=1, subtopics=2, questions=3)
    fake_provider.models = PRICES
    assert cli(["-C", project.dir, "questions"], env=project.env).returncode == 0  # subtopics too
    seeded = from_history(project.history())
    assert len(project.records("questions")) == 6

    gate, held, lock = threading.Event(), [], threading.Lock()

    def responder(req):
        with lock:
            first = not held
            held.append(req)
        if first:
            gate.wait(30)  # one answer waits until the test has scraped

    fake_provider.responder = responder
    fake_provider.script(Fault.rate_limited(0.05))  # one retry
    textfile = tmp_path / "textfiles" / "demo.prom"
    env = clean_env({**project.env, "OVERBRAINER_METRICS__LISTEN": "127.0.0.1:0",
                     "OVERBRAINER_METRICS__TEXTFILE": str(textfile)}, tmp_path / "home")
    cmd = Command([sys.executable, "-m", "overbrainer", "-C", str(project.dir), "answers"], env, tmp_path)
    try:
        url = cmd.metrics_url()
        done = ("overbrainer_stage_items_total", (("result", "done"), ("stage", "answers")))
        got = wait_until(lambda: (g := scrape(url)) and g[done] == 5 and g, "5 answers done")
        assert got[("overbrainer_stage_running", (("stage", "answers"),))] == 1
        assert got[("overbrainer_stage_running", (("stage", "questions"),))] == 0
        assert got[("overbrainer_item_retries_total", (("stage", "answers"),))] == 1
        # The earlier stages come from history; the answers so far from the events.
        for key, value in seeded.items():
            if "answers" not in str(key):
                assert abs(got[key] - value) < 1e-9, key
        answers_in = ("overbrainer_tokens_total", (("direction", "in"), ("model", "deepseek/deepseek-r1"),
                                                   ("stage", "answers")))
        assert got[answers_in] > 0
        assert got[("overbrainer_build_info", (("version", "0.1.0"),))] == 1
        assert not textfile.exists()  # written when a stage ends
    finally:
        gate.set()
        code, out, err = cmd.finish()
    assert code == 0, err
    assert out.startswith("answers: 6 questions, 6 answers written; 0 skipped, 0 failed;")
    history = project.history()
    assert [h["stage"] for h in history] == ["subtopics", "questions", "answers"]
    final = samples(textfile.read_text())
    assert_counters_equal(final, from_history(history))
    assert final[answers_in] >= got[answers_in]
    assert {k[1][0][1]: v for k, v in final.items() if k[0] == "overbrainer_stage_running"} == {
        "subtopics": 0, "questions": 0, "answers": 0, "gate": 0, "split": 0}
    assert final[("overbrainer_item_retries_total", (("stage", "answers"),))] == 1
    assert list(textfile.parent.iterdir()) == [textfile]


def last_values(metrics_jsonl) -> dict:
    """The last value of each field over the `log` lines of a run's metrics.jsonl."""
    values: dict = {}
    for line in metrics_jsonl.read_text().splitlines():
        rec = json.loads(line)
        if rec["event"] == "log":
            values.update({k: v for k, v in rec.items() if v is not None})
    return values


def train_values(got: dict, rid: str) -> dict:
    names = {"overbrainer_train_step": "step", "overbrainer_train_max_steps": "max_steps",
             "overbrainer_train_loss": "loss", "overbrainer_eval_loss": "eval_loss",
             "overbrainer_learning_rate": "learning_rate"}
    return {names[k[0]]: v for k, v in got.items() if k[0] in names and k[1] == (("run_id", rid),)}


def phases(got: dict, rid: str) -> dict:
    return {dict(k[1])["phase"]: v for k, v in got.items()
            if k[0] == "overbrainer_train_phase" and dict(k[1])["run_id"] == rid}


def test_a_training_run_leaves_its_last_metrics_in_the_textfile(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    textfile = tmp_path / "demo.prom"
    p.env["OVERBRAINER_METRICS__TEXTFILE"] = str(textfile)
    r = p.run("train")
    assert r.returncode == 0, r.stderr
    rid = p.run_ids()[0]
    final = last_values(p.runs / rid / "metrics.jsonl")
    got = samples(textfile.read_text(), "Train Demo")
    assert train_values(got, rid) == {k: final[k] for k in ("step", "max_steps", "loss", "learning_rate")}
    assert train_values(got, rid) == {"step": 2, "max_steps": 2, "loss": 1.25, "learning_rate": 0.0001}
    assert phases(got, rid) == {}  # no longer followed


def test_a_training_run_scraped_while_it_trains(tmp_path, fake_axolotl):
    p = make_project(tmp_path, fake_axolotl)
    fake_axolotl.set_mode("slow")
    textfile = tmp_path / "demo.prom"
    env = clean_env({**p.env, "OVERBRAINER_METRICS__LISTEN": "127.0.0.1:0",
                     "OVERBRAINER_METRICS__TEXTFILE": str(textfile)}, p.home)
    cmd = Command(p.args("train"), env, tmp_path)
    rid = None
    try:
        url = cmd.metrics_url()
        rid = wait_until(lambda: p.run_ids() and p.run_ids()[0], "the run")

        def trained():
            got = scrape(url, "Train Demo")
            return train_values(got, rid).get("step", 0) >= 3 and got
        got = wait_until(trained, "three steps")
        values = train_values(got, rid)
        on_disk = last_values(p.runs / rid / "metrics.jsonl")
        assert values["step"] <= on_disk["step"] and values["max_steps"] == on_disk["max_steps"] == 600
        assert values["loss"] == on_disk["loss"] == 1.0 and "learning_rate" not in values
        assert phases(got, rid) == {"training": 1, "evaluating": 0, "finalizing": 0, "merging": 0,
                                    "exporting": 0, "retrieving": 0}
        cmd.proc.send_signal(signal.SIGINT)  # detaches: the job goes on
        code, _, err = cmd.finish(timeout=30)
        assert code == 130, err
        left = samples(textfile.read_text(), "Train Demo")
        assert values["step"] <= train_values(left, rid)["step"] <= last_values(p.runs / rid / "metrics.jsonl")["step"]
        assert phases(left, rid) == {}
    finally:
        if cmd.proc.poll() is None:
            cmd.finish(timeout=5)
        if rid is not None:
            assert p.run("train", "cancel", rid).returncode == 0


def test_a_host_name_is_a_configuration_error(project, cli):
    r = cli(["-C", project.dir, "answers"], env={**project.env, "OVERBRAINER_METRICS__LISTEN": "localhost:9464"})
    assert r.returncode == 2
    assert "metrics.listen: expected IP:PORT" in r.stderr and "(from OVERBRAINER_METRICS__LISTEN)" in r.stderr
    assert project.history() == []


PROBE = """
import sys
from overbrainer.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
sys.stderr.write("\\nLOADED " + str(sorted(m for m in sys.modules if m.split(".")[0] == "prometheus_client")[:1]))
"""


def loaded(args, env) -> str:
    r = subprocess.run([sys.executable, "-c", PROBE, *map(str, args)], capture_output=True, text=True,
                       env=clean_env(env), timeout=60)
    return r.stderr.strip().splitlines()[-1]


def test_prometheus_client_is_imported_only_by_a_locking_command_with_metrics_set(project):
    assert loaded(["-C", project.dir, "split"], project.env) == "LOADED []"
    env = {**project.env, "OVERBRAINER_METRICS__TEXTFILE": "demo.prom"}
    assert loaded(["-C", project.dir, "config", "check"], env) == "LOADED []"
    assert loaded(["-C", project.dir, "split"], env) == "LOADED ['prometheus_client']"
    assert (project.dir / "demo.prom").is_file()  # relative to the project
