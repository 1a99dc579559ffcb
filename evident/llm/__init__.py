"""The language models: chat models, extraction calls, reply parsing and batching."""
