#!/usr/bin/env python3
"""Make the test bed's tiny models locally (no hub): real safetensors checkpoints, a byte-level BPE
tokenizer trained here, and a ChatML chat template with Qwen3's ``enable_thinking`` switch.

    make_tiny_model.py OUT_DIR

writes three model directories under OUT_DIR (skipped when their stamp matches this script):

- ``tiny-chat``:    a Qwen3ForCausalLM with random weights (hidden 192, 6 heads of 32, 6 KV heads,
                    2 layers): a plain model whose answers are noise, for serving and load tests.
- ``tiny-reason``:  the same shape, built so greedy decoding always answers with the same thinking
                    and the same answer.  The attention output and MLP down projections are zero, so
                    the last hidden state is the normalised embedding of the last token, and an
                    untied ``lm_head`` maps each token of a chain to the next one:
                    ``<think>REASONING</think>ANSWER<|im_end|>``.  With thinking on the generation
                    prompt ends in "\\n", which starts the chain at ``<think>``; with
                    ``enable_thinking=False`` the template closes an empty think block itself and
                    the chain goes on from ``</think>``, so only the answer comes out.  That
                    exercises ``--reasoning-parser qwen3`` for real.
- ``tiny-newarch``: ``tiny-reason`` whose config.json names ``Qwen4MoeForCausalLM``, an architecture
                    this vLLM does not have: the story's unknown-architecture failure, for real.

6 heads of 32 and a vocabulary of 2304 (= 3 x 768) divide by tensor parallel 1, 2 and 3 (vLLM shards
the untied lm_head by vocabulary rows and asserts that they divide); head size 32 is one the CPU
attention supports.
Needs torch, transformers, tokenizers and safetensors: run it with the test bed's vLLM environment on
PYTHONPATH (scripts/testbed does).  The reasoning and answer texts are exported for tests.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
from pathlib import Path

REASONING = "Okay, user wants a short reply so I greet them"
ANSWER = "Hello from the tiny model!"
NEW_ARCH = "Qwen4MoeForCausalLM"
SHAPE = dict(hidden_size=192, intermediate_size=384, num_hidden_layers=2, num_attention_heads=6,
             num_key_value_heads=6, head_dim=32, vocab_size=2304, max_position_embeddings=4096)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
THINK = ["<think>", "</think>"]  # ordinary (non-special) added tokens, as in Qwen3's tokenizer
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{{- '<|im_start|>' + message['role'] + '\\n' -}}"
    "{%- if message['content'] is string -%}{{- message['content'] -}}"
    "{%- else -%}{%- for part in message['content'] -%}{%- if part['type'] == 'text' -%}{{- part['text'] -}}"
    "{%- endif -%}{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{- '<think></think>' -}}{%- endif -%}"
    "{%- endif -%}"
)


def stamp() -> str:
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]


def training_text() -> list[str]:
    """Local text to train the tokenizer on: the chain's own words, often, plus some filler."""
    words = (REASONING + " " + ANSWER).split()
    lines = [REASONING, ANSWER] * 200
    filler = ("the quick brown fox jumps over the lazy dog while a tiny model answers every prompt "
              "sent to it by the test bed with thinking first and then a short reply").split()
    for i in range(400):
        lines.append(" ".join(filler[(i + k) % len(filler)] for k in range(12)))
        lines.append(" ".join(words[(i + k) % len(words)] for k in range(6)))
    return lines


def make_tokenizer(out: Path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=1500, special_tokens=SPECIAL,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(training_text(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None)
    fast.add_tokens(THINK)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(out)
    return fast


def chain_ids(tok) -> list[int]:
    text = "<think>" + REASONING + "</think>" + ANSWER + "<|im_end|>"
    ids = tok.encode(text, add_special_tokens=False)
    if len(set(ids)) != len(ids):
        dup = [tok.convert_ids_to_tokens(i) for i in ids if ids.count(i) > 1]
        raise SystemExit(f"make_tiny_model: the chain repeats tokens {sorted(set(dup))}: pick other words")
    return ids


def config_for(tok, arch: str):
    from transformers import Qwen3Config

    cfg = Qwen3Config(**SHAPE, tie_word_embeddings=False, rms_norm_eps=1e-6, rope_theta=10000.0,
                      bos_token_id=tok.convert_tokens_to_ids("<|endoftext|>"),
                      eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"),
                      pad_token_id=tok.convert_tokens_to_ids("<|endoftext|>"))
    cfg.architectures = [arch]
    cfg.torch_dtype = "bfloat16"
    return cfg


def build_reasoning_weights(model, tok) -> None:
    import torch

    chain = chain_ids(tok)
    start = tok.encode("<|im_start|>assistant\n", add_special_tokens=False)[-1]  # last token with thinking on
    if start in chain:
        raise SystemExit("make_tiny_model: the generation prompt's last token is inside the chain")
    nxt = {start: chain[0]}
    nxt.update(zip(chain, chain[1:]))
    g = torch.Generator().manual_seed(7)
    hidden = SHAPE["hidden_size"]
    with torch.no_grad():
        emb = torch.randn(SHAPE["vocab_size"], hidden, generator=g)
        model.model.embed_tokens.weight.copy_(emb)
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.model.norm.weight.fill_(1.0)
        head = torch.randn(SHAPE["vocab_size"], hidden, generator=g) * 0.01
        for cur, after in nxt.items():
            # RMSNorm(e) ~ e / rms(e): aligning row `after` with e_cur makes it win by ~sqrt(hidden)
            head[after] += emb[cur] / emb[cur].pow(2).mean().sqrt() * 4.0
        model.lm_head.weight.copy_(head)


def write_model(out: Path, arch: str, deterministic: bool) -> None:
    import torch
    from transformers import AutoModelForCausalLM

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    tok = make_tokenizer(tmp)
    torch.manual_seed(11)
    model = AutoModelForCausalLM.from_config(config_for(tok, "Qwen3ForCausalLM"))
    if deterministic:
        build_reasoning_weights(model, tok)
    model = model.to(torch.bfloat16)
    model.save_pretrained(tmp, safe_serialization=True)
    cfg = json.loads((tmp / "config.json").read_text())
    cfg["architectures"] = [arch]  # save_pretrained writes the class it saved; the new name goes in after
    (tmp / "config.json").write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
    (tmp / "generation_config.json").unlink(missing_ok=True)  # greedy by default: the server's defaults rule
    if deterministic:
        check_chain(model, tok)
    (tmp / "sparktui-tiny.json").write_text(json.dumps(
        {"stamp": stamp(), "reasoning": REASONING if deterministic else None,
         "answer": ANSWER if deterministic else None, "architecture": arch}, indent=2) + "\n")
    shutil.rmtree(out, ignore_errors=True)
    tmp.rename(out)


def check_chain(model, tok) -> None:
    """Greedy-decode here once: what the server must answer, proven before it is served."""
    import torch

    for thinking, want in ((True, "<think>" + REASONING + "</think>" + ANSWER), (False, ANSWER)):
        prompt = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False,
                                         add_generation_prompt=True, enable_thinking=thinking)
        ids = torch.tensor([tok.encode(prompt, add_special_tokens=False)])
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=40, do_sample=False,
                                 eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"))
        got = tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)
        if got != want:
            raise SystemExit(f"make_tiny_model: greedy decoding gave {got!r}, wanted {want!r}")


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    root = Path(argv[0])
    root.mkdir(parents=True, exist_ok=True)
    todo = {"tiny-chat": ("Qwen3ForCausalLM", False), "tiny-reason": ("Qwen3ForCausalLM", True),
            "tiny-newarch": (NEW_ARCH, True)}
    for name, (arch, det) in todo.items():
        d = root / name
        try:
            if json.loads((d / "sparktui-tiny.json").read_text())["stamp"] == stamp():
                continue
        except (OSError, ValueError, KeyError):
            pass
        write_model(d, arch, det)
        print(f"make_tiny_model: wrote {d}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
