"""Live, permission-aware connectors over HTTP APIs: MediaWiki, Confluence, documentation sites."""
