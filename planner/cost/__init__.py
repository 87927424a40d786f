"""The one serving cost model: mean TPOT, TTFT and throughput of one engine instance.

``serving.predict`` is the entry; ``step`` costs a decode step op by op, ``step_comm`` its
collectives, ``ttft`` the scheduler's admission, ``comm`` the collective latency curves,
``routing`` the busiest EP rank's experts. ``params`` names every parameter (the fitted ones
load from fitted.json), ``bands`` the measured error band, ``calibrate`` the host's own factors.
"""
