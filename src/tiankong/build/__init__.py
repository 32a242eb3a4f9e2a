"""Making and checking model files: ONNX export and its cache, the INT8 guard, training."""
