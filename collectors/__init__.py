"""Collectors: ``python -m collectors <verb>``. Each verb measures or parses, then hands a
run bundle to the store (spool -> commit). The verb table is collectors/cli.py.

core/ the verb framework; inventory/ the host and its GPUs; comm/ collectives and
nccl-tests; serving/ what every serving engine shares, with vllm/ and sglang/ inside;
trace/ profile imports; profile/ the built-in decode step; upkeep/ store upkeep verbs.
"""
