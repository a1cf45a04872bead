"""End-to-end scenarios through the CLI, named for the scenario (not for a module)."""
