"""The `pod` commands' flows: `pod ls` (ls.py), `pod rm` (rm.py), the catalog listings and `pod ssh`
(catalog.py), and what the pods cost for `runs ls|show` and `history` (summary.py)."""
