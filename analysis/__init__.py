"""Pure analysis helpers shared by pages and reports: no Streamlit, no I/O, no torch."""
