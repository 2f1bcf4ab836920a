"""`run --plan`: the lines of what `run` does after the training."""

from __future__ import annotations


def test_run_plan_says_where_the_after_training_jobs_run_and_that_they_rent_nothing_more():
    from types import SimpleNamespace

    from overbrainer.pipeline.plan_train import after_plans

    none = SimpleNamespace(export=SimpleNamespace(after_training=False, quantize="Q4_K_M"),
                           hub=SimpleNamespace(after_training=False))
    assert after_plans(none) == []
    both = SimpleNamespace(export=SimpleNamespace(after_training=True, quantize="Q8_0"),
                           hub=SimpleNamespace(after_training=True))
    [(export, e), (push, h)] = after_plans(both)
    assert export == ("export: inside the training job (Q8_0), on its target and within its max_hours; "
                      "no pod of its own")
    assert push == "push: from this machine to the Hugging Face Hub; no job, no rent"
    assert (e["stage"], e["cost_max_usd"], h["stage"], h["cost_max_usd"]) == ("export", 0, "push", 0)
