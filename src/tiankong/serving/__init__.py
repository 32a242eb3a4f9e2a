"""Engine access for any server: the dynamic batcher, caches and the predictor."""
