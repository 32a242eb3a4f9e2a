"""The request path's pure stages: text and masks, model sources, results, decoding, search."""
