"""Stepscope planner: model/hardware specs, layouts, the decode-step cost model and the
precision policy. Pure: no Streamlit, no torch, no I/O beyond reading a config or policy file.
"""
