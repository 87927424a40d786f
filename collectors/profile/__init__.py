"""The built-in MoE decode step under torch.profiler (``profile``). The verb is command.py."""
