"""What the pipeline counted and spent: what one stage execution counted (`stages`), the
history of every execution with its tokens and cost and the share of paid output tokens that
ended in kept examples (`history`: .overbrainer/history.jsonl), and `dataset stats`' numbers
(`stats`)."""
