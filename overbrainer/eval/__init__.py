"""`eval`: lm-evaluation-harness tasks on the child (its GGUF on llama-server) and on the parent."""
