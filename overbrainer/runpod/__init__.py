"""The Runpod target: a GPU pod per run, provisioned, watched and deleted once the results are back."""
