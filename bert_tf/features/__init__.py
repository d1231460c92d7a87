"""Frozen-encoder features: layer naming, pooling to sentence features, and an encoder's every layer.

`pooling` and `layer_selection` are backend-free (keras.ops and plain Python).
"""
