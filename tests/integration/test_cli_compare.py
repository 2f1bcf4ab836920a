"""`overbrainer compare` against the fake provider as judge: a compare whose child answers are in
its directory (as the job on the target leaves them) is judged, counted and reported."""

from __future__ import annotations

import json

from tests.fixtures.compare import RUN, add_judge, new_compare_dir, stage_compare

# 10 questions: 6 wins, 2 ties, 1 loss, 1 child error (counted as a loss, the judge not asked).
OUTCOMES = {f"q{i:02d}": o for i, o in enumerate(
    ["win", "win", "tie", "loss", "win", "error", "win", "tie", "win", "win"])}


def _compare(cli, project, *args):
    return cli(["-C", project.dir, "compare", *args], env=project.env)


def test_judges_counts_and_reports(project, fake_provider, cli):
    staged = stage_compare(project, OUTCOMES)
    fake_provider.responder = staged.judge
    r = _compare(cli, project, "--rejudge", staged.compare_id)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"runs/{RUN}/compares/{staged.compare_id}/compare.md"
    doc = staged.compare_json
    s = doc["summary"]
    assert (s["questions"], s["wins"], s["ties"], s["losses"], s["errors"], s["unparsed"]) == (10, 6, 2, 1, 1, 0)
    # (6 + 2) / 10 = 0.8. Wilson, z = 1.959964, z² = 3.841459, n = 10:
    #   centre = (0.8 + 3.841459/20) / (1 + 3.841459/10) = 0.9920730 / 1.3841459 = 0.7167402
    #   half   = 1.959964 · sqrt(0.8·0.2/10 + 3.841459/400) / 1.3841459
    #          = 1.959964 · 0.1600114 / 1.3841459 = 0.3136166 / 1.3841459 = 0.2265777
    #   → [0.4901625, 0.9433179]
    assert s["win_or_tie"] == 0.8
    assert abs(s["win_or_tie_interval"][0] - 0.4901625) < 2e-6
    assert abs(s["win_or_tie_interval"][1] - 0.9433179) < 2e-6
    # Speed over the 9 answers without an error (q05 failed): seconds = 1,2,3,4,5,7,8,9,10.
    # p50: rank ceil(0.5·9) = 5 → 5 s; p95: rank ceil(8.55) = 9 → 10 s; mean = 49/9.
    assert (s["latency_p50"], s["latency_p95"]) == (5.0, 10.0)
    assert abs(s["mean_seconds"] - 49 / 9) < 1e-9
    assert s["first_token_p50"] == 0.5 and s["truncated"] == 1  # q01 stopped at the token limit
    assert len(fake_provider.chat_requests()) == 9  # q05 (the child's error) never reaches the judge
    by_id = {q["id"]: q for q in doc["questions"]}
    assert by_id["q00"]["child"] == "CHILD says 0"  # reasoning stripped
    assert by_id["q05"]["child"] is None and by_id["q05"]["verdict"] == "error"
    assert doc["judge"] == "fake/deepseek/deepseek-r1" and doc["judge_is_parent"] is True
    md = (staged.compare_dir / "compare.md").read_text()
    assert "| Win or tie | 80.0% (95 % interval 49.0% to 94.3%) |" in md
    assert "| Wins / ties / losses | 6 / 2 / 2 |" in md
    assert "## Losses (first 2 of 2)" in md and "> (no answer: HTTP 500 from llama-server)" in md
    assert "The judge is the parent" in md and "The child ran on a CPU (build ubuntu-x64)" in md
    assert "127.0.0.1" not in md and "127.0.0.1" not in json.dumps(doc)  # the judge is named, never its URL
    prompt = fake_provider.chat_requests()[0].body["messages"]
    assert [m["role"] for m in prompt] == ["user"]  # one user prompt, no system prompt
    assert "let me see" not in prompt[0]["content"]

    # A rerun with the same judge and prompt sends nothing and reports the same numbers.
    fake_provider.clear()
    r = _compare(cli, project, "--rejudge", staged.compare_id)
    assert r.returncode == 0, r.stderr
    assert fake_provider.chat_requests() == []
    assert staged.compare_json["summary"]["win_or_tie"] == 0.8


def test_another_judge_judges_again_in_its_own_file(project, fake_provider, cli):
    staged = stage_compare(project, OUTCOMES)
    fake_provider.responder = staged.judge
    assert _compare(cli, project, "--rejudge", staged.compare_id).returncode == 0
    first_file = staged.verdict_files()
    fake_provider.clear()
    add_judge(project, "judge/small-judge")
    r = _compare(cli, project, "--rejudge", staged.compare_id, "--run", RUN)
    assert r.returncode == 0, r.stderr
    assert len(fake_provider.chat_requests()) == 9
    assert {q.body["model"] for q in fake_provider.chat_requests()} == {"judge/small-judge"}
    assert len(staged.verdict_files()) == 2 and first_file[0].exists()
    doc = staged.compare_json
    assert doc["judge"] == "fake/judge/small-judge" and doc["judge_is_parent"] is False
    assert doc["verdicts_file"] != first_file[0].name


def test_unparsable_verdict_is_asked_once_more(project, fake_provider, cli):
    staged = stage_compare(project, {"q00": "garbage_once", "q01": "garbage", "q02": "win"})
    fake_provider.responder = staged.judge
    r = _compare(cli, project, "--rejudge", staged.compare_id)
    assert r.returncode == 0, r.stderr
    assert staged.asked == {"q00": 2, "q01": 2, "q02": 1}  # 2 tries, never a third
    lines = {v["id"]: v["verdict"] for v in staged.verdict_lines()}
    assert lines == {"q00": "win", "q01": "unparsed", "q02": "win"}
    s = staged.compare_json["summary"]
    assert s["unparsed"] == 1 and s["win_or_tie"] == 1.0  # unparsed left out of the denominator


def test_both_orders_counts_a_flip_as_a_tie(project, fake_provider, cli):
    outcomes = {"q00": "win", "q01": "first", "q02": "loss", "q03": "first"}
    staged = stage_compare(project, outcomes)
    fake_provider.responder = staged.judge
    r = _compare(cli, project, "--rejudge", staged.compare_id, "--both-orders")
    assert r.returncode == 0, r.stderr
    assert staged.asked == {q: 2 for q in outcomes}  # every question in both orders
    lines = staged.verdict_lines()
    assert sorted((v["id"], v["child_first"]) for v in lines) == sorted(
        (q, first) for q in outcomes for first in (True, False))
    doc = staged.compare_json
    s = doc["summary"]
    # q01 and q03: the judge always picks A, so the two orders disagree → ties, 2 flips of 4.
    assert (s["wins"], s["ties"], s["losses"]) == (1, 2, 1)
    assert (s["flips"], s["order_pairs"], s["flip_rate"]) == (2, 4, 0.5)
    assert {q["id"]: q["verdict"] for q in doc["questions"]} == {"q00": "win", "q01": "tie", "q02": "loss", "q03": "tie"}
    md = (staged.compare_dir / "compare.md").read_text()
    assert "| Order flips (both orders judged; a flip counts as a tie) | 2 of 4 (50.0%) |" in md
    # A rerun in both orders asks nothing; in one order it reads the seeded half of the same file.
    fake_provider.clear()
    assert _compare(cli, project, "--rejudge", staged.compare_id, "--both-orders").returncode == 0
    assert _compare(cli, project, "--rejudge", staged.compare_id).returncode == 0
    assert fake_provider.chat_requests() == []
    assert staged.compare_json["summary"]["both_orders"] is False


def test_min_win_or_tie_gates_on_the_lower_bound(project, fake_provider, cli):
    staged = stage_compare(project, OUTCOMES)
    fake_provider.responder = staged.judge
    r = _compare(cli, project, "--rejudge", staged.compare_id, "--min-win-or-tie", "0.6")
    assert r.returncode == 1, r.stderr
    assert "lower bound is under --min-win-or-tie 0.6" in r.stderr and "49.0%" in r.stderr
    assert r.stdout.strip().endswith("compare.md")  # the report is written and named first
    r = _compare(cli, project, "--json", "--rejudge", staged.compare_id, "--min-win-or-tie", "0.45")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["compare"] == staged.compare_id and out["summary"]["win_or_tie"] == 0.8
    r = _compare(cli, project, "--rejudge", staged.compare_id, "--min-win-or-tie", "60")
    assert r.returncode == 2 and "--min-win-or-tie" in r.stderr


def test_judge_failure_keeps_the_verdicts_so_far(project, fake_provider, cli):
    from tests.fixtures.provider import Fault

    staged = stage_compare(project, OUTCOMES)

    def judge(req):
        return Fault.unauthorized("sk-nope") if "number 07" in req.prompt else staged.judge(req)

    fake_provider.responder = judge
    project.write(pipeline={"concurrency": 1})
    r = _compare(cli, project, "--rejudge", staged.compare_id)
    assert r.returncode == 1
    assert f"resume with `overbrainer compare --rejudge {staged.compare_id}`" in r.stderr
    assert "sk-nope" not in r.stderr
    kept = {v["id"] for v in staged.verdict_lines()}
    assert {"q00", "q05", "q06"} <= kept and "q07" not in kept
    assert not (staged.compare_dir / "compare.json").exists()


def test_a_judge_error_on_one_question_fails_that_question_only(project, fake_provider, cli):
    from tests.fixtures.provider import Fault

    staged = stage_compare(project, OUTCOMES)

    def judge(req):  # q07 answers 500 every time (no wait asked), the others their verdicts
        if "number 07" in req.prompt:
            return Fault(500, {"error": {"message": "judge exploded"}}, {"Retry-After": "0"})
        return staged.judge(req)

    fake_provider.responder = judge
    r = _compare(cli, project, "--rejudge", staged.compare_id)
    assert r.returncode == 1, r.stderr
    assert (f"error: judge fake/deepseek/deepseek-r1: 1 verdict of 10 failed (q07); the others are kept in "
            f"{staged.verdict_files()[0].name}; resume with `overbrainer compare --rejudge {staged.compare_id}`"
            in r.stderr), r.stderr
    assert len(fake_provider.chat_requests()) == 8 + 3  # the others once, q07 with its 2 retries
    kept = {v["id"] for v in staged.verdict_lines()}
    assert kept == set(OUTCOMES) - {"q07"}  # every other question judged (q05: the child's error)
    assert not (staged.compare_dir / "compare.json").exists()
    # The rerun asks q07 only, and reports.
    fake_provider.clear()
    fake_provider.responder = staged.judge
    r = _compare(cli, project, "--rejudge", staged.compare_id)
    assert r.returncode == 0, r.stderr
    assert len(fake_provider.chat_requests()) == 1 and staged.compare_json["summary"]["win_or_tie"] == 0.8


def test_the_spend_cap_stops_the_judge(project, fake_provider, cli):
    from tests.fixtures.provider import Answer

    staged = stage_compare(project, OUTCOMES)
    fake_provider.models = {"deepseek/deepseek-r1": (3.0, 6.0)}

    def judge(req):  # each verdict costs 50 × $3/M + 190 × $6/M = $0.00129; its bound about 3×
        answer = staged.judge(req)
        return Answer(answer.content, usage=(50, 190)) if answer is not None else None

    fake_provider.responder = judge
    project.write(pipeline={"max_cost_usd": 0.008, "concurrency": 1}, parent={"max_tokens": 200})
    r = _compare(cli, project, "--rejudge", staged.compare_id)
    assert r.returncode == 1, r.stderr
    assert "spend cap reached: $0.00" in r.stderr and "of max_cost_usd $0.0080" in r.stderr, r.stderr
    asked = len(fake_provider.chat_requests())
    assert 1 <= asked < 9
    assert len(staged.verdict_lines()) == asked + 1  # what was paid for is kept (and q05's error)
    assert not (staged.compare_dir / "compare.json").exists()
    # A larger cap: the rerun asks only for the rest.
    fake_provider.clear()
    project.write(pipeline={"max_cost_usd": 1.0}, parent={"max_tokens": 200})
    r = _compare(cli, project, "--rejudge", staged.compare_id)
    assert r.returncode == 0, r.stderr
    assert len(fake_provider.chat_requests()) == 9 - asked


def test_rejudge_needs_the_child_answers(project, fake_provider, cli):
    staged = stage_compare(project, OUTCOMES)
    (staged.compare_dir / "child_answers.jsonl").unlink()
    r = _compare(cli, project, "--rejudge", staged.compare_id)
    assert r.returncode == 1
    assert f"compare {staged.compare_id} has no answers of the child: run `overbrainer compare --run {RUN}` again" in r.stderr


def test_plan_errors(project, fake_provider, cli):
    r = _compare(cli, project)
    assert r.returncode == 1
    assert "no run has a GGUF, and no run succeeded: train one first" in r.stderr
    staged = stage_compare(project, {"q00": "win"})
    (staged.run_dir / "output" / "gguf" / f"{RUN}-Q4_K_M.gguf").unlink()
    r = _compare(cli, project, "--run", RUN)
    assert r.returncode == 1 and f"run {RUN} has no GGUF, and cannot be exported first: " in r.stderr
    r = _compare(cli, project, "--rejudge", "compare_19990101-000000")
    assert r.returncode == 2 and "no compare `compare_19990101-000000`" in r.stderr
    r = _compare(cli, project, "--rejudge", staged.compare_id, "--limit", "3")
    assert r.returncode == 2 and "--limit only applies to a new compare" in r.stderr
    assert json.loads((staged.compare_dir / "setup.json").read_text())["seed"] == 42


def test_plan_picks_the_newest_gguf_and_writes_setup(project, fake_provider):
    from overbrainer.compare import plan
    from tests.fixtures.compare import eval_record, write_run

    old = write_run(project, "demo_20261101-000000", created="2026-11-01T00:00:00Z")
    new = write_run(project, "demo_20261102-000000", created="2026-11-02T00:00:00Z")
    # An export in exports/<id>/ counts too, and a newer export.json whose file is gone does not.
    (old / "exports" / "export_1").mkdir(parents=True)
    (old / "exports" / "export_1" / "export.json").write_text(json.dumps(
        {"file": "output/gguf/other.gguf", "created": "2026-11-03T00:00:00Z", "quantize": "Q8_0"}))
    (old / "output" / "gguf" / "other.gguf").write_bytes(b"GGUF")
    (new / "exports" / "export_2").mkdir(parents=True)
    (new / "exports" / "export_2" / "export.json").write_text(json.dumps(
        {"file": "output/gguf/gone.gguf", "created": "2026-11-04T00:00:00Z"}))
    gguf = plan.pick_run(project.dir, None)
    assert (gguf.run, gguf.file, gguf.quantize) == (old.name, "output/gguf/other.gguf", "Q8_0")
    assert plan.pick_run(project.dir, new.name).file == f"output/gguf/{new.name}-Q4_K_M.gguf"

    project.data.mkdir(parents=True, exist_ok=True)
    unusable = {"id": "nope", "topic": "t", "subtopic": "s", "messages": [{"role": "user", "content": "Q"}],
                "meta": {}}
    lines = [eval_record(0), unusable, eval_record(1), eval_record(2)]
    (project.data / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    compare_id, compare_dir = new_compare_dir(project.dir, new.name)
    assert compare_dir == new / "compares" / compare_id and compare_id.startswith("compare_")
    plan.write_setup(compare_dir, plan.make_setup(project.dir, project.config(), plan.pick_run(project.dir, new.name),
                                                  compare_id, 2))
    setup = plan.load_setup(compare_dir)
    assert [q["id"] for q in setup["questions"]] == ["q00", "q01"]  # the first 2 usable, in file order
    assert setup["questions"][0] == {
        "id": "q00", "topic": "topic0", "parent": "PARENT says 0", "parent_input_tokens": 100,
        "parent_output_tokens": 400, "messages": [{"role": "system", "content": "Be helpful."},
                                                  {"role": "user", "content": "How do I do thing number 00?"}]}
    assert (setup["run"], setup["compare"], setup["seed"], setup["quantize"], setup["llama_cpp"]) == (
        new.name, compare_id, 42, "Q4_K_M", "b11320")
    assert (setup["base_model"], setup["context"]) == ("HuggingFaceTB/SmolLM2-135M-Instruct", 2048)
    assert setup["gguf"] == f"output/gguf/{new.name}-Q4_K_M.gguf" and setup["created"].endswith("Z")


def test_a_judge_that_bills_costs_what_it_billed(project, fake_provider, cli):
    """An OpenRouter judge: its bills (here 3× the listed prices) are the judge stage's cost."""
    staged = stage_compare(project, OUTCOMES)
    fake_provider.responder = staged.judge
    fake_provider.dialect = "openrouter"
    fake_provider.models = {"deepseek/deepseek-r1": (1.0, 2.0)}
    fake_provider.billing_factor = 3.0
    env = {**project.env, "OVERBRAINER_PROVIDERS__FAKE__DIALECT": "openrouter"}
    r = cli(["--json", "-C", project.dir, "compare", "--rejudge", staged.compare_id], env=env)
    assert r.returncode == 0, r.stderr
    [finished] = [e for e in map(json.loads, r.stderr.splitlines()) if e.get("event") == "stage_finished"]
    usage = finished["stats"]["usage"]
    listed = (usage["input_tokens"] * 1.0 + usage["output_tokens"] * 2.0) / 1e6
    assert finished["stage"] == "judge" and abs(finished["stats"]["cost"] - 3 * listed) < 1e-9
