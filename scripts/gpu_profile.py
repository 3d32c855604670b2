"""GPU encode profile: time tokenisation, forward, blocked head + pooling, and transfer + extraction
separately, then ``benchmark.splade.encode`` end to end (numbers in the README, Performance).

Usage on a GPU box: BENCHMARK_MODEL_DIR=<folder with bert-tiny/> python scripts/gpu_profile.py
"""
import time, random, sys, os, torch, numpy as np
sys.path[:0] = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")]
from transformers import AutoTokenizer, BertConfig, BertForMaskedLM
from benchmark import splade
tok = AutoTokenizer.from_pretrained(os.path.join(os.environ["BENCHMARK_MODEL_DIR"], "bert-tiny"))
words = [w for w in tok.get_vocab() if w.isalpha() and len(w) > 2]
rng = random.Random(0)
docs = [" ".join(rng.choices(words, k=rng.randint(20, 100))) for _ in range(20000)]
torch.manual_seed(0)
model = BertForMaskedLM(BertConfig()).eval().cuda()
model.cls.predictions.decoder.bias.data.fill_(-2.0) if model.cls.predictions.decoder.bias is not None else None
print("attn impl", model.config._attn_implementation)
def sync(): torch.cuda.synchronize()
t=time.perf_counter(); tokens = splade._tokenize(tok, docs, 256); print("tokenize", round(time.perf_counter()-t,2))
lengths = np.array([len(x) for x in tokens]); order = np.argsort(-lengths, kind="stable")
for bs in (256, 1024):
  for dt in (torch.bfloat16,):
    fwd=pool=xfer=0.0
    dec = model.cls.predictions.decoder
    hook = dec.register_forward_pre_hook(splade._capture)
    w = dec.weight.detach().to(dt); b = dec.bias.detach() if dec.bias is not None else None
    with torch.inference_mode(), torch.autocast("cuda", dtype=dt):
      for s in range(0, len(docs), bs):
        rows = order[s:s+bs]
        ids, mask = splade._pad(tokens, rows, 0, torch.device("cuda"))
        sync(); t=time.perf_counter()
        try: model(input_ids=ids, attention_mask=mask)
        except splade._Captured as c: h = c.hidden
        sync(); t2=time.perf_counter(); fwd += t2-t
        p = splade._pool_decoder(h, mask, w, b)
        sync(); t3=time.perf_counter(); pool += t3-t2
        p = torch.log1p(torch.relu(p)).cpu().numpy()
        for i in range(len(rows)):
            nz = np.flatnonzero(p[i] > 0)
        t4=time.perf_counter(); xfer += t4-t3
    hook.remove()
    print(f"bs {bs} {dt}: forward {fwd:.2f}s pool {pool:.2f}s transfer+extract {xfer:.2f}s for {len(docs)} docs")
t=time.perf_counter(); r = splade.encode(model, tok, docs, max_length=256, batch_size=256, precision="bfloat16"); sync(); print("encode() bf16 bs256", round(time.perf_counter()-t,2))
t=time.perf_counter(); r = splade.encode(model, tok, docs, max_length=256, batch_size=1024, precision="bfloat16"); sync(); print("encode() bf16 bs1024", round(time.perf_counter()-t,2))
