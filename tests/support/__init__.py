"""Plain helpers shared by tests (no fixtures here)."""
