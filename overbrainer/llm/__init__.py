"""LLM clients: the `openai` and `anthropic` protocols, retries, prices, the circuit breaker.

Import `overbrainer.llm.client` (it pulls in requests) only in commands that talk to providers."""
