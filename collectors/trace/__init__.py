"""Import profiles (Kineto JSON today) as one run: readers, then steps, taxonomy and analysis.

The ``trace`` verb is command.py.
"""
