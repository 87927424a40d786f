"""What every serving engine shares: result import (JSON, JSONL, printed blocks) and rows.

Engines (collectors/vllm, collectors/sglang) add thin adapters: their field names, file
names, endpoints and launch flags.
"""
