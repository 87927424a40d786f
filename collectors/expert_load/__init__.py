"""Import (or record from a running SGLang server) routed-token counts per layer and expert.

The ``expert-load`` verb is command.py; sglang_files.py reads SGLang's recorder outputs,
record.py drives a server's start / stop / dump endpoints, model.py names the model.
"""
