"""Tasks beside fill-mask, each one package over the shared parts (tokenization, engines, the
batcher, the corpus index): ``check`` (proofreading, 校对)."""
