"""overbrainer: distil a large parent LLM into a small open-weights child model."""

__version__ = "0.1.0"
