"""Pushing a run to the Hugging Face Hub: what is pushed (files), the model card (card), the Hub
calls through `huggingface_hub` (client, push) and the `push` flow (flow); `push --dataset`: the
split as Parquet (parquet), the dataset card (dataset_card) and its flow (dataset_flow).

`huggingface_hub` is imported only when a push talks to the Hub, never at start-up."""
