"""The embedded index: loading a corpus, storing it in SQLite, ranking it with Tantivy."""
