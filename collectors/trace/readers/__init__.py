"""Profile file readers: each fills the same event columns (collectors/trace/columns.py)."""
