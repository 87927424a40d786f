"""Run bundles and their spool on disk: written atomically, claimed, listed."""
