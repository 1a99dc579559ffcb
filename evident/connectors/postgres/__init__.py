"""`type = "postgres"`: documents and their sections in PostgreSQL, the store several replicas share.

`schema` (the tables), `dsn` (the connection string, its password never shown), `search` (full-text
ranking with permissions in the WHERE clause), `refresh` (`evident index --config`: one transaction per
refresh, vectors beside the text), `retriever` (the LangChain retriever a query asks). docs/postgres.md
describes the source as a user sees it.
"""
