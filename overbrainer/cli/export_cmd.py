"""`overbrainer export RUN_ID [--quantize TYPE] [--ollama NAME]`. Takes the project lock."""

from __future__ import annotations

import click

from overbrainer.cli import complete
from overbrainer.cli.context import pass_app
from overbrainer.config.model import QUANTIZE_TYPES
from overbrainer.export.flow import export_flow
from overbrainer.jobs import ids


@click.command("export")
@click.argument("run_id", shell_complete=complete.run_ids)
@click.option("--quantize", type=click.Choice(QUANTIZE_TYPES), default=None,
              help="The GGUF type (default: [export] quantize, else Q4_K_M).")
@click.option("--ollama", metavar="NAME", default=None,
              help="Create an Ollama model of that name from the GGUF (default: [export] ollama_name).")
@click.option("--target", "target", metavar="NAME", default=None,
              help="Export on this target (default: [export] target, else the run's own).")
@click.option("--keep-pod", is_flag=True, help="On a runpod target: keep the export's pod afterwards.")
@pass_app
def export(app, run_id: str, quantize: str | None, ollama: str | None, target: str | None, keep_pod: bool) -> None:
    """Turn a run's model into a GGUF file (and an Ollama Modelfile), on the run's own target.

    On a runpod target the export gets a new pod, deleted once the GGUF is home (its price is
    said before it is created). Ctrl-C cancels the export. llama.cpp comes from the target's
    llama_cpp_dir (or OVERBRAINER_LLAMA_CPP_DIR), else a pinned release downloaded and verified there.
    """
    ids.validate(run_id)
    with app.open_project(write=True) as config:
        export_flow(app.session(config), run_id, quantize=quantize, ollama=ollama, target=target, keep=keep_pod)
