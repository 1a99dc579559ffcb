"""The language models: chat models (`models`), their servers (`servers`), retries and failures
(`failures`), extraction calls (`extraction`), reply parsing (`replies`) and batching (`batching`)."""
