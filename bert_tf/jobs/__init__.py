"""The jobs as library functions that take configs; `experiments/` holds their command lines.

Modules: `extract_features` (activations of chosen layers, per token or pooled per line) and `probe_layers`
(which layer's frozen features serve a task best). Imported on first use.
"""
