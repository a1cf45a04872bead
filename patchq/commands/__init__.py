"""One module per CLI verb; each returns a JSON-ready document and an exit code."""
