"""The results store: schema, migrations, spool, commit and the named queries pages use.

Nothing here imports Streamlit, torch or knows about kernels or models.
"""

from store.packages import preseed_duckdb_version

__version__ = "0.1.0"

# Before any store module imports duckdb: its version module would import importlib.metadata.
preseed_duckdb_version()
