"""Collectors: ``python -m collectors <verb>``. Each verb measures or parses, then hands a
run bundle to the store (spool -> commit). See collectors/cli.py for the verb table."""
