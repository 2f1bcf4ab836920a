"""The quality of the dataset: which generated texts and answers are kept. Near-duplicate
questions dropped (`dedup`: lexical; `embed_dedup`: by meaning; `textstore`
holds their texts), answers that overlap a benchmark or the eval split left out of the split
(`decontam`, reading the benchmark files with `benchmarks`), and the quality gate's rule checks
(`gate_rules`, with `language` and `json_schema`) and verdicts (`verdicts`: data/gate.jsonl)."""
