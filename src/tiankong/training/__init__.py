"""Training and fine-tuning the masked LM: options, data, masking, batches, the loop."""
