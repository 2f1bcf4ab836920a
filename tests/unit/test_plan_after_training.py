"""`run --plan`: the lines of what `run` does after the training."""

from __future__ import annotations


def test_run_plan_says_where_the_after_training_jobs_run_and_that_they_rent_nothing_more():
    from overbrainer.config.model import Config, Export, Hub, Project, Role, Roles
    from overbrainer.pipeline.plan_train import after_plans

    roles = Roles(generator=Role("p", "g"), parent=Role("p", "q"))
    none = Config(project=Project("demo"), roles=roles)
    assert after_plans(none) == []
    both = Config(project=Project("demo"), roles=roles, export=Export(after_training=True, quantize="Q8_0"),
                  hub=Hub(after_training=True))
    [(export, e), (push, h)] = after_plans(both)
    assert export == ("export: inside the training job (Q8_0), on its target and within its max_hours; "
                      "no pod of its own")
    assert push == "push: from this machine to the Hugging Face Hub; no job, no rent"
    assert (e["stage"], e["cost_max_usd"], h["stage"], h["cost_max_usd"]) == ("export", 0, "push", 0)
