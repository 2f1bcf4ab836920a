"""LLM clients: the `openai` and `anthropic` protocols, retries, prices (spec pipeline.md §3).

Import `overbrainer.llm.client` (it pulls in requests) only in commands that talk to providers."""
