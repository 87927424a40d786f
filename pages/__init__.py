"""Dashboard pages, run by st.navigation from app.py; what they share lives in helpers/."""
