"""Stepscope dashboard: ``streamlit run app.py``. Navigation, shared sidebar, nothing else.

Pages live in pages/ and read the store only through store.queries and planner/.
The store is chosen by ``STEPSCOPE_STORE`` (or the default path), never by a URL, so a
shared link cannot point the server at another file.
"""

import streamlit as st

from pages.helpers import ui

st.set_page_config(page_title="Stepscope", page_icon=":material/speed:", layout="wide")

# Only pages that really work are listed; each later page adds one line here.
PAGES = [
    st.Page("pages/overview.py", title="Overview", icon=":material/dashboard:", default=True,
            url_path="overview"),
    st.Page("pages/kernels.py", title="Kernel breakdown", icon=":material/stacked_bar_chart:",
            url_path="kernels"),
    st.Page("pages/hardware.py", title="Hardware", icon=":material/memory:", url_path="hardware"),
    st.Page("pages/collectives.py", title="Collectives", icon=":material/hub:",
            url_path="collectives"),
    st.Page("pages/tradeoff.py", title="Tradeoff calculator", icon=":material/balance:",
            url_path="tradeoff"),
    st.Page("pages/policy.py", title="Policy", icon=":material/policy:", url_path="policy"),
    st.Page("pages/serving.py", title="Serving", icon=":material/dns:", url_path="serving"),
    st.Page("pages/trends.py", title="Trends", icon=":material/trending_up:", url_path="trends"),
]  # fmt: skip

navigation = st.navigation(PAGES)
ui.sidebar()
navigation.run()
