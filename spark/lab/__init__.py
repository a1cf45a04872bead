"""The hand-run boot and CPU-level lab: tiny models, slimmed wheels, boot and import records (see BOOT.md)."""
