"""SPLADE encoding: ``w_j = max_t log(1 + relu(logit_{t,j}))`` over the attention-masked tokens.

Why not ``SparseEncoder.encode_document``: it materialises the [batch, length, vocab] logits and
runs mask/relu/log1p/max as separate passes over them (≈1 GB per batch of 32×256 on a 30k
vocabulary, ≈3 GB peak RSS). Here the same vectors come from

* length-sorted batches (little padding; input order restored on return);
* the model's own forward up to the MLM decoder, stopped there, so the [B, L, V] logits are never
  built (``forward``);
* padding positions overwritten with the document's first token, so they never change a max and
  no mask pass is needed. log1p∘relu is monotone, so ``max_t log1p(relu(x_t)) = log1p(relu(max_t x_t))``:
  the transcendental runs on the pooled maxima only (``pooling``);
* a **screen** over the vocabulary, then an **exact recompute** of the candidates it leaves
  (``screens``), every screen giving the same vectors, bit for bit;
* the fastest screen on this machine, chosen by measurement (``probe``).

``encoder`` holds ``encode`` and its paths; ``impacts`` the integer impacts the index stores.
"""
