"""Making and checking model files: ONNX export, INT8 recipes and guard, the export cache."""
