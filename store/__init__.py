"""The results store: schema, migrations, spool, commit and the named queries pages use.

Nothing here imports Streamlit, torch or knows about kernels or models.
"""

__version__ = "0.1.0"
