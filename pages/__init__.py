"""Dashboard pages (run by st.navigation from app.py) and their shared UI helpers (ui.py)."""
