"""What the pipeline counted and spent: what one stage execution counted (`stages`), the
history of every execution with its tokens and cost (`history`: .overbrainer/history.jsonl), the
share of paid output tokens that ended in kept examples (`kept`), and `dataset stats`' numbers
(`stats`)."""
