"""pytest plugin for faithgate: ``pytest --faithgate`` runs the configured release gate."""
