"""Random prompts of L tokens for ``load-test --random-input-len L``, counted by the served model.

As ``vllm bench serve``'s random dataset does (``gen_prompt_decode_to_target_len``), but with the
server's tokenizer (``probes.tokenizer``: vLLM's ``/tokenize`` and ``/detokenize``) since the
model's files are on the node:

1. a pool of token ids: random words (drawn with the run's seed) tokenized once;
2. each prompt: a window of ``n`` ids from a random place in the pool (wrapping), detokenized;
3. the text counted as the chat completion will be (the chat template and generation prompt
   included: L is what the server prefills, what ``usage.prompt_tokens`` then reports), and ``n``
   moved by the difference until the count is L.  Decode-then-encode is not one-to-one (merges at
   the edges), so a window that keeps landing on L +- 1 is moved along by one id; after
   ``MAX_TRIES`` the closest one is kept and its real length recorded.

A server without ``/tokenize`` (or one that fails) gets the old word prompts (about one token a
word, which many tokenizers split further) and a note saying the length is approximate.  At most
``MAX_DISTINCT`` prompts are built; a longer run cycles them.  No Textual here.
"""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass

from ..probes.api_guard import ServingError
from ..probes.tokenizer import ServerTokenizer

MAX_DISTINCT = 256  # prompts built before the run (each costs a few /tokenize calls)
MAX_TRIES = 8  # detokenize + count rounds a prompt
POOL_WORDS = 4096  # words tokenized for the pool, at most (its ids are reused, wrapping, past that)
BUILD_CONCURRENCY = 8

WORDS = ("time", "river", "green", "model", "light", "stone", "paper", "cloud", "north", "quiet", "table", "music",
         "bread", "winter", "garden", "number", "signal", "window", "orange", "circle", "market", "engine", "silver",
         "forest", "letter", "bridge", "summer", "yellow", "planet", "doctor", "mirror", "ticket", "castle", "rocket")


def word_prompt(rng: random.Random, n_words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n_words))


@dataclass(frozen=True)
class Prompts:
    texts: list[str]
    lengths: list[int | None]  # each text's length in tokens as the server counts it (None: not counted)
    note: str = ""  # why the lengths are not exact ("" when every one was counted)


def approximate(rng: random.Random, length: int, count: int, why: str) -> Prompts:
    texts = [word_prompt(rng, length) for _ in range(count)]
    return Prompts(texts, [None] * count, f"input length approximate: {why}")


async def build(base_url: str, model: str, api_key: str | None, rng: random.Random, *, length: int, count: int,
                chat_template_kwargs: dict | None = None, timeout: float = 10.0) -> Prompts:
    """``count`` prompts of ``length`` tokens each (``rng`` draws the words and the windows)."""
    count = max(1, min(count, MAX_DISTINCT))
    pool_text = word_prompt(rng, min(length, POOL_WORDS) + 16)  # a word is at least one token
    starts = [rng.random() for _ in range(count)]  # drawn here: the builds below run concurrently
    try:
        async with ServerTokenizer(base_url, model, api_key, timeout=timeout) as tok:
            pool = await tok.tokenize(pool_text)
            if not pool:
                raise ServingError("/tokenize: no tokens for the word pool", kind="malformed")
            first = await _one(tok, pool, int(starts[0] * len(pool)), length, length, chat_template_kwargs)
            # the chat template's share, learnt from the first prompt, starts the others near L
            guess = max(1, length - (first[1] - first[2]))
            sem = asyncio.Semaphore(BUILD_CONCURRENCY)

            async def one(s: float) -> tuple[str, int, int]:
                async with sem:
                    return await _one(tok, pool, int(s * len(pool)), guess, length, chat_template_kwargs)

            rest = await asyncio.gather(*(one(s) for s in starts[1:]))
            limit = tok.max_model_len
    except ServingError as exc:
        why = "server has no /tokenize" if exc.kind == "no_tokenize" else f"{exc}"
        return approximate(rng, length, count, why)
    built = [first, *rest]
    lengths: list[int | None] = [c for _, c, _ in built]
    notes = []
    if min(c for _, c, _ in built) > length:
        notes.append(f"the chat template alone is about {first[1] - first[2]} tokens: prompts are at least "
                     f"{min(c for _, c, _ in built)}")
    if limit and length >= limit:
        notes.append(f"{length} tokens do not fit the server's max_model_len {limit}")
    return Prompts([t for t, _, _ in built], lengths, "; ".join(notes))


async def _one(tok: ServerTokenizer, pool: list[int], start: int, n: int, length: int,
               kwargs: dict | None) -> tuple[str, int, int]:
    """(text, its count as a chat prompt, the ids it was made of) closest to ``length``."""
    best: tuple[str, int, int] | None = None
    seen: set[int] = set()
    for _ in range(MAX_TRIES):
        ids = [pool[(start + k) % len(pool)] for k in range(n)]
        text = await tok.detokenize(ids)
        c = await tok.count_chat(text, kwargs)
        if best is None or abs(c - length) < abs(best[1] - length):
            best = (text, c, n)
        if c == length:
            break
        seen.add(n)
        nxt = max(1, n + length - c)
        if nxt == n:  # one id and still too long: the template alone is longer than L
            break
        if nxt in seen:  # edges merging back and forth: another window
            start += 1
        n = nxt
    assert best is not None
    return best
