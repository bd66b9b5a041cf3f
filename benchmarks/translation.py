"""Benchmark: training and beam-search speed of our translation model against torch.nn.Transformer and Hugging
Face MarianMTModel of the same size, side by side in one process.

    python benchmarks/translation.py           # Multi30k-like: d_model 256, 4 heads, FFN 1024, 3 + 3 layers, vocab 8000
    python benchmarks/translation.py --quick   # smoke run: tiny sizes, 1 round (under a minute)

Three tables, each at 1 and 2 torch threads (``torch.set_num_threads`` between them, same process, same models):

1. training target tokens per second (one step: collate the 64 pairs, forward, label-smoothed cross-entropy
   (0.1), backward, clip to norm 1, AdamW step) of our seq2seq (plan ``full``, the real
   ``Seq2SeqTrainer`` step) against ``torch.nn.Transformer`` (pre-LN, GELU) and against ``MarianMTModel``
   (random init from a ``MarianConfig`` built here; post-LN as Marian is), all with one embedding shared by
   encoder, decoder and output projection, dropout 0.1, sinusoidal positions; goal: ours >= 1.0x nn.Transformer;
2. time per training step of ``soft_bias(dependency)`` against ``full`` (same batches, real dependency trees of
   the bundled UD English PUD sentences of 13-15 words); goal: <= 1.10x;
3. beam-5 sentences per second of our ``translate_examples`` against ``MarianMTModel.generate(num_beams=5)`` on
   the same source batches. Both models have random weights, so both are forced to decode the same fixed number
   of steps: ``</s>`` is blocked until the last step and forced there (ours: a hook on the output projection and
   ``max_len_a=0, max_len_b=L``; HF: ``min_length = max_length = L + 1`` and ``forced_eos_token_id``);
   goal: ours >= 1.5x HF.

With ``--bf16`` (the default where the CPU computes bfloat16 natively; ``--no-bf16`` skips them), two more tables
compare precisions at the Multi30k training size (128 pairs a batch, ``M30K``), each at 1 and 2 threads:

4. training target tokens per second in bf16 (``training.precision = 'bf16'``: autocast, fused AdamW, padded
   targets skipped) against our fp32 step (the baseline, ratio 1) and ``nn.Transformer`` in fp32 and under bf16
   autocast (fused AdamW; not compiled: ``torch.compile`` is not tried here); goals: ours bf16 >= 3.0x our fp32
   step, >= 1.2x nn.Transformer bf16; per step in bf16, soft_bias(dependency) <= 1.10x full, ssan <= 1.4x;
5. beam-5 sentences per second of ``translate_examples(precision='bf16')`` against its fp32 call and
   ``MarianMTModel.generate`` under bf16 autocast; goals: >= 2.0x fp32, >= 1.5x HF bf16.

A figure is the best of interleaved rounds (one warm-up call each, the garbage collector off); the clock is CPU
time at 1 thread and wall clock at more. The machine (CPU model, cores) and ``uptime`` load are printed before
and after.
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import subprocess
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from _timing import CLOCKS, timed, without_gc  # noqa: E402
from torch import nn  # noqa: E402

from structattn.encoders import EncoderConfig  # noqa: E402
from structattn.seq2seq import PairExample, Seq2SeqOptions, build_seq2seq, pair_batch, translate_examples  # noqa: E402
from structattn.structures import get_provider, read_conllu  # noqa: E402
from structattn.structures.readers.bundled import bundled_treebank  # noqa: E402
from structattn.training.config import TrainConfig  # noqa: E402
from structattn.training.seq2seq import Seq2SeqTrainer  # noqa: E402

PAD, BOS, EOS = 0, 2, 3
TREEBANK = bundled_treebank("en_pud")  # gold UD English PUD, shipped in the package


@dataclass(frozen=True)
class Sizes:
    d_model: int
    num_heads: int
    ffn_dim: int
    layers: int
    vocab: int
    batch: int
    batches: int
    decode_steps: int
    rounds: int


FULL = Sizes(256, 4, 1024, 3, 8000, 64, 4, 20, 3)
QUICK = Sizes(32, 2, 64, 1, 200, 8, 2, 6, 1)
M30K = Sizes(256, 4, 1024, 3, 8000, 128, 2, 20, 3)  # the bf16 tables: configs/runs/multi30k.gin's batch of 128 pairs
DROPOUT, SMOOTHING = 0.1, 0.1


# -- data ----------------------------------------------------------------------------------------------------
def make_batches(sizes: Sizes, treebank: Path = TREEBANK) -> list[list[PairExample]]:
    """``sizes.batches`` batches of ``sizes.batch`` pairs: sources are treebank sentences of 13-15 words (their
    gold dependency trees; word ids drawn at random), targets random ids of 13-15 tokens.

    Raises:
        ValueError: the treebank has no sentence of 13-15 words.
    """
    provider = get_provider("dependency")
    sentences = [s for s in read_conllu(treebank) if 13 <= len(s.words) <= 15 and s.heads is not None]
    if not sentences:
        raise ValueError(f"{treebank}: no sentence of 13-15 words with heads")
    g = torch.Generator().manual_seed(0)
    examples = []
    for k in range(sizes.batch * sizes.batches):
        sentence = sentences[k % len(sentences)]
        source = torch.randint(4, sizes.vocab, (len(sentence.words),), generator=g).tolist()
        target = torch.randint(4, sizes.vocab, (int(torch.randint(13, 16, (1,), generator=g)),), generator=g).tolist()
        examples.append(PairExample(source, {"dependency": provider(sentence)}, target, sentence.id))
    return [examples[i:i + sizes.batch] for i in range(0, len(examples), sizes.batch)]


# -- models --------------------------------------------------------------------------------------------------
def ours(sizes: Sizes, plan: str) -> nn.Module:
    torch.manual_seed(0)
    config = EncoderConfig(d_model=sizes.d_model, num_layers=sizes.layers, num_heads=sizes.num_heads,
                           ffn_dim=sizes.ffn_dim, dropout=DROPOUT)
    options = Seq2SeqOptions(shared_vocab=True, tie_embeddings=True)
    fields = {"dependency": get_provider("dependency").provides}
    return build_seq2seq(config, options, plan, sizes.vocab, sizes.vocab, fields, BOS, EOS)


class TorchTransformer(nn.Module):
    """``torch.nn.Transformer`` (pre-LN, GELU) with a shared embedding scaled by ``sqrt(d_model)``, sinusoidal
    positions and the output projection tied to the embedding.

    Shapes:
        forward(source (b, n), target_in (b, t)) -> logits (b, t, V).
    """

    def __init__(self, sizes: Sizes, max_len: int = 512) -> None:
        super().__init__()
        torch.manual_seed(0)
        d = sizes.d_model
        self.embedding = nn.Embedding(sizes.vocab, d, padding_idx=PAD)
        nn.init.normal_(self.embedding.weight, std=d**-0.5)
        position = torch.arange(max_len)[:, None] * torch.exp(torch.arange(0, d, 2) * (-math.log(10000.0) / d))
        self.register_buffer("positions", torch.stack([position.sin(), position.cos()], dim=-1).flatten(1), persistent=False)
        self.dropout = nn.Dropout(DROPOUT)
        with warnings.catch_warnings():  # its encoder's nested-tensor fast path is off with norm_first: said above
            warnings.filterwarnings("ignore", message="enable_nested_tensor is True")
            self.transformer = nn.Transformer(d, sizes.num_heads, sizes.layers, sizes.layers, sizes.ffn_dim, DROPOUT,
                                              activation="gelu", batch_first=True, norm_first=True)
        self.output = nn.Linear(d, sizes.vocab, bias=False)
        self.output.weight = self.embedding.weight

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.dropout(self.embedding(ids) * self.embedding.embedding_dim**0.5 + self.positions[: ids.shape[1]])

    def forward(self, source: torch.Tensor, target_in: torch.Tensor) -> torch.Tensor:
        t = target_in.shape[1]
        causal = torch.ones(t, t, dtype=torch.bool).triu(1)  # True: not allowed (the key is in the future)
        hidden = self.transformer(self.embed(source), self.embed(target_in), tgt_mask=causal, tgt_is_causal=True,
                                  src_key_padding_mask=source == PAD, tgt_key_padding_mask=target_in == PAD,
                                  memory_key_padding_mask=source == PAD)
        return self.output(hidden)


def marian(sizes: Sizes) -> nn.Module:
    """``MarianMTModel`` of the same size, random init, one embedding for encoder, decoder and output."""
    from transformers import MarianConfig, MarianMTModel

    torch.manual_seed(0)
    config = MarianConfig(vocab_size=sizes.vocab, decoder_vocab_size=sizes.vocab, d_model=sizes.d_model,
                          encoder_layers=sizes.layers, decoder_layers=sizes.layers,
                          encoder_attention_heads=sizes.num_heads, decoder_attention_heads=sizes.num_heads,
                          encoder_ffn_dim=sizes.ffn_dim, decoder_ffn_dim=sizes.ffn_dim, activation_function="gelu",
                          dropout=DROPOUT, attention_dropout=DROPOUT, activation_dropout=DROPOUT,
                          max_position_embeddings=128, scale_embedding=True, pad_token_id=PAD, eos_token_id=EOS,
                          bos_token_id=BOS, decoder_start_token_id=BOS, forced_eos_token_id=EOS,
                          share_encoder_decoder_embeddings=True, tie_word_embeddings=True)
    return MarianMTModel(config)


# -- training steps --------------------------------------------------------------------------------------------
def train_config(sizes: Sizes, precision: str = "fp32") -> TrainConfig:
    return TrainConfig(lr=1e-4, warmup_steps=100, batch_size=sizes.batch, clip_norm=1.0, precision=precision)


def plain_step(model: nn.Module, logits_of: Callable[[nn.Module, object], torch.Tensor],
               optimizer: torch.optim.Optimizer) -> Callable[[list[PairExample]], None]:
    """One training step of a baseline, doing what ``Seq2SeqTrainer``'s step does (collate, loss, clip, AdamW)."""
    def step(examples: list[PairExample]) -> None:
        model.train()
        batch = pair_batch(examples, BOS, EOS)
        logits = logits_of(model, batch)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), batch.target_out.flatten(), ignore_index=PAD,
                               label_smoothing=SMOOTHING)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
    return step


def trainer_step(model: nn.Module, sizes: Sizes, precision: str = "fp32") -> Callable[[list[PairExample]], None]:
    trainer = Seq2SeqTrainer(model, train_config(sizes, precision), label_smoothing=SMOOTHING, quiet=True)
    return trainer._train_on  # the real step of our training loop


def autocast_logits(logits_of: Callable[[nn.Module, object], torch.Tensor]) -> Callable[[nn.Module, object], torch.Tensor]:
    """``logits_of`` under CPU bfloat16 autocast (the loss is taken in float32 by ``plain_step``)."""
    def run(model: nn.Module, batch) -> torch.Tensor:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return logits_of(model, batch)
    return run


def torch_logits(model: nn.Module, batch) -> torch.Tensor:
    return model(batch.source.input_ids, batch.target_in)


def marian_logits(model: nn.Module, batch) -> torch.Tensor:
    return model(input_ids=batch.source.input_ids, attention_mask=batch.source.token_mask.long(),
                 decoder_input_ids=batch.target_in, decoder_attention_mask=(batch.target_in != PAD).long()).logits


def adamw(model: nn.Module, sizes: Sizes, fused: bool = False) -> torch.optim.AdamW:
    config = train_config(sizes)
    return torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay, fused=fused or None)


# -- timing ----------------------------------------------------------------------------------------------------
def best_of(calls: dict[str, Callable[[], None]], rounds: int, clock: Callable[[], float]) -> dict[str, float]:
    """Best time of each call over ``rounds`` interleaved rounds (a, b, c, a, b, c, ...), after one warm-up each."""
    for fn in calls.values():
        timed(fn, clock)
    times = {name: [] for name in calls}
    for _ in range(rounds):
        for name, fn in calls.items():
            times[name].append(timed(fn, clock))
    return {name: min(values) for name, values in times.items()}


def over(batches: list[list[PairExample]], step: Callable[[list[PairExample]], None]) -> Callable[[], None]:
    return without_gc(lambda: [step(b) for b in batches])


# -- the three tables ------------------------------------------------------------------------------------------
def training_table(sizes: Sizes, batches, models, clock) -> list[tuple[str, float, float]]:
    steps = {"ours (full)": trainer_step(models["full"], sizes),
             "nn.Transformer": plain_step(models["torch"], torch_logits, adamw(models["torch"], sizes)),
             "MarianMTModel": plain_step(models["marian"], marian_logits, adamw(models["marian"], sizes))}
    seconds = best_of({name: over(batches, step) for name, step in steps.items()}, sizes.rounds, clock)
    tokens = sum(len(e.target_ids) + 1 for b in batches for e in b)
    base = tokens / seconds["ours (full)"]
    return [(name, tokens / s, base / (tokens / s)) for name, s in seconds.items()]


def plan_table(sizes: Sizes, batches, models, clock) -> list[tuple[str, float, float]]:
    steps = {"full": trainer_step(models["full"], sizes), "soft_bias(dependency)": trainer_step(models["soft"], sizes)}
    seconds = best_of({name: over(batches, step) for name, step in steps.items()}, sizes.rounds, clock)
    return [(name, s / len(batches), s / seconds["full"]) for name, s in seconds.items()]


def block_eos(module: nn.Module, inputs, output: torch.Tensor) -> torch.Tensor:
    """Forward hook on our output projection: ``</s>`` never wins (search forces it at the length limit)."""
    output[..., EOS] = -1e4
    return output


@torch.no_grad()
def decoding_table(sizes: Sizes, batches, models, clock) -> list[tuple[str, float, float]]:
    model, hf = models["full"].eval(), models["marian"].eval()
    length = sizes.decode_steps  # decoder steps per hypothesis, </s> included
    options = Seq2SeqOptions(shared_vocab=True, beam=5, max_len_a=0.0, max_len_b=length)
    sources = [pair_batch(b, BOS, EOS).source for b in batches]

    def run_ours() -> list:
        return [translate_examples(model, b, options, beam=5, batch_size=sizes.batch) for b in batches]

    def run_hf() -> list:
        return [hf.generate(input_ids=s.input_ids, attention_mask=s.token_mask.long(), num_beams=5,
                            min_length=length + 1, max_length=length + 1, do_sample=False) for s in sources]

    handle = model.decoder.output.register_forward_hook(block_eos)
    try:
        got_ours, got_hf = run_ours(), run_hf()
        lengths = {len(h) + 1 for out in got_ours for h in out} | {out.shape[1] - 1 for out in got_hf}
        if lengths != {length}:
            raise AssertionError(f"decoders did not all take {length} steps: {sorted(lengths)}")
        seconds = best_of({"ours translate_examples": without_gc(run_ours), "MarianMTModel.generate": without_gc(run_hf)},
                          sizes.rounds, clock)
    finally:
        handle.remove()
    sentences = sizes.batch * len(batches)
    base = sentences / seconds["ours translate_examples"]
    return [(name, sentences / s, base / (sentences / s)) for name, s in seconds.items()]


def bf16_training_table(sizes: Sizes, batches, models, clock) -> list[tuple[str, float, float]]:
    """Target tokens/s of each step and its ratio to our fp32 step's (>1: faster than our fp32 step)."""
    steps = {"ours full, fp32": trainer_step(models["full"], sizes),
             "ours full, bf16": trainer_step(models["full_bf16"], sizes, "bf16"),
             "nn.Transformer, fp32": plain_step(models["torch"], torch_logits, adamw(models["torch"], sizes)),
             "nn.Transformer, bf16 autocast": plain_step(models["torch_bf16"], autocast_logits(torch_logits),
                                                         adamw(models["torch_bf16"], sizes, fused=True)),
             "ours soft_bias(dependency), bf16": trainer_step(models["soft_bf16"], sizes, "bf16"),
             "ours ssan, bf16": trainer_step(models["ssan_bf16"], sizes, "bf16")}
    seconds = best_of({name: over(batches, step) for name, step in steps.items()}, sizes.rounds, clock)
    tokens = sum(len(e.target_ids) + 1 for b in batches for e in b)
    base = seconds["ours full, fp32"]
    return [(name, tokens / s, base / s) for name, s in seconds.items()]


@torch.no_grad()
def bf16_decoding_table(sizes: Sizes, batches, models, clock) -> list[tuple[str, float, float]]:
    """Beam-5 sentences/s and the ratio to our fp32 ``translate_examples`` (>1: faster)."""
    model, hf = models["full"].eval(), models["marian"].eval()
    length = sizes.decode_steps
    options = Seq2SeqOptions(shared_vocab=True, beam=5, max_len_a=0.0, max_len_b=length)
    sources = [pair_batch(b, BOS, EOS).source for b in batches]

    def run_ours(precision: str) -> Callable[[], list]:
        return lambda: [translate_examples(model, b, options, beam=5, batch_size=sizes.batch, precision=precision)
                        for b in batches]

    def run_hf() -> list:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            return [hf.generate(input_ids=s.input_ids, attention_mask=s.token_mask.long(), num_beams=5,
                                min_length=length + 1, max_length=length + 1, do_sample=False) for s in sources]

    handle = model.decoder.output.register_forward_hook(block_eos)
    try:
        seconds = best_of({"ours translate_examples, fp32": without_gc(run_ours("fp32")),
                           "ours translate_examples, bf16": without_gc(run_ours("bf16")),
                           "MarianMTModel.generate, bf16 autocast": without_gc(run_hf)}, sizes.rounds, clock)
    finally:
        handle.remove()
    sentences = sizes.batch * len(batches)
    base = seconds["ours translate_examples, fp32"]
    return [(name, sentences / s, base / s) for name, s in seconds.items()]


def bf16_models(sizes: Sizes) -> dict[str, nn.Module]:
    return {"full": ours(sizes, "full"), "full_bf16": ours(sizes, "full"),
            "soft_bf16": ours(sizes, "soft_bias(dependency)"), "ssan_bf16": ours(sizes, "ssan"),
            "torch": TorchTransformer(sizes), "torch_bf16": TorchTransformer(sizes), "marian": marian(sizes)}


def thread_clocks(threads: list[int], heading: str = "") -> Iterator[Callable[[], float]]:
    """Per thread count, in order: set torch's threads, print the section's heading, and yield its clock (CPU time
    at 1 thread, wall clock at more)."""
    for n in threads:
        torch.set_num_threads(n)
        clock_name = "cpu" if n == 1 else "wall"
        print(f"\n## {heading}{n} thread(s), {clock_name} clock")
        yield CLOCKS[clock_name]


def print_bf16_tables(sizes: Sizes, threads: list[int]) -> None:
    batches = make_batches(sizes)
    models = bf16_models(sizes)
    print(f"\n# bf16 at the Multi30k size: {sizes.batches} batches of {sizes.batch} pairs, best of {sizes.rounds} round(s)")
    for clock in thread_clocks(threads, "bf16, "):
        train = bf16_training_table(sizes, batches, models, clock)
        print_table("Training step, fp32 and bf16", "target tokens/s", "tokens/s / ours fp32's", train)
        r = {name: ratio for name, _, ratio in train}
        speedup, vs_torch = r["ours full, bf16"], r["ours full, bf16"] / r["nn.Transformer, bf16 autocast"]
        soft = r["ours full, bf16"] / r["ours soft_bias(dependency), bf16"]
        ssan = r["ours full, bf16"] / r["ours ssan, bf16"]
        print(f"ours bf16 / ours fp32 tokens/s: {speedup:.2f}x (goal >= 3.0x: {verdict(speedup >= 3.0)}); "
              f"ours bf16 / nn.Transformer bf16: {vs_torch:.2f}x (goal >= 1.2x: {verdict(vs_torch >= 1.2)})")
        print(f"bf16 time per step: soft_bias(dependency) / full {soft:.2f}x (goal <= 1.10x: {verdict(soft <= 1.10)}); "
              f"ssan / full {ssan:.2f}x (goal <= 1.4x: {verdict(ssan <= 1.4)})")
        decode = bf16_decoding_table(sizes, batches, models, clock)
        print_table(f"Beam 5, fp32 and bf16, every hypothesis forced to {sizes.decode_steps} decoder steps",
                    "sentences/s", "sentences/s / ours fp32's", decode)
        d = {name: ratio for name, _, ratio in decode}
        ours_bf16 = d["ours translate_examples, bf16"]
        vs_hf = ours_bf16 / d["MarianMTModel.generate, bf16 autocast"]
        print(f"ours bf16 / ours fp32 sentences/s: {ours_bf16:.2f}x (goal >= 2.0x: {verdict(ours_bf16 >= 2.0)}); "
              f"ours bf16 / HF generate bf16: {vs_hf:.2f}x (goal >= 1.5x: {verdict(vs_hf >= 1.5)})")


# -- report ----------------------------------------------------------------------------------------------------
def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} logical CPUs"


def load() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError) as error:
        return f"uptime unavailable ({error})"


def print_table(title: str, unit: str, ratio: str, rows: list[tuple[str, float, float]]) -> None:
    print(f"\n{title}\n| model | {unit} | {ratio} |\n|---|---:|---:|")
    for name, value, r in rows:
        print(f"| {name} | {value:.3f} | {r:.3f} |" if value < 10 else f"| {name} | {value:.1f} | {r:.3f} |")


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 1 round: a smoke test")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds (default 3; --quick: 1)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--bf16", action=argparse.BooleanOptionalAction, default=None,
                        help="also the bf16 tables (default: where the CPU has native bf16)")
    parser.add_argument("--bf16-only", action="store_true", help="only the bf16 tables")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    if args.rounds is not None:
        sizes = Sizes(**{**sizes.__dict__, "rounds": args.rounds})
    import transformers

    print(f"machine: {machine()}; torch {torch.__version__}, transformers {transformers.__version__}")
    print(f"load before: {load()}")
    bf16 = args.bf16 if args.bf16 is not None else (args.bf16_only or native_bf16())
    if not args.bf16_only:
        fp32_tables(sizes, args.threads)
    if bf16:
        m30k = QUICK if args.quick else Sizes(**{**M30K.__dict__, "rounds": sizes.rounds})
        print_bf16_tables(m30k, args.threads)
    print(f"\nload after: {load()}")


def native_bf16() -> bool:
    from structattn.training.precision import native_bf16 as native

    return native("cpu")


def fp32_tables(sizes: Sizes, threads_list: list[int]) -> None:
    batches = make_batches(sizes)
    models = {"full": ours(sizes, "full"), "soft": ours(sizes, "soft_bias(dependency)"),
              "torch": TorchTransformer(sizes), "marian": marian(sizes)}
    params = {name: sum(p.numel() for p in m.parameters()) for name, m in models.items()}
    print(f"sizes: d_model {sizes.d_model}, {sizes.num_heads} heads, FFN {sizes.ffn_dim}, {sizes.layers} + {sizes.layers} "
          f"layers, vocab {sizes.vocab}, dropout {DROPOUT}; {sizes.batches} batches of {sizes.batch} sentences of 13-15 "
          f"tokens; best of {sizes.rounds} round(s); parameters: "
          + ", ".join(f"{name} {n / 1e6:.2f}M" for name, n in params.items()))
    for clock in thread_clocks(threads_list):
        train = training_table(sizes, batches, models, clock)
        print_table("Training (collate, forward, loss, backward, clip, AdamW)", "target tokens/s",
                    "ours tokens/s / theirs", train)
        vs_torch = train[1][2]
        print(f"ours / nn.Transformer tokens/s: {vs_torch:.2f}x (goal >= 1.0x: {verdict(vs_torch >= 1.0)})")
        plan = plan_table(sizes, batches, models, clock)
        print_table("Training step by plan (same batches, gold dependency trees)", "s/step", "time / full's", plan)
        print(f"soft_bias(dependency) / full time: {plan[1][2]:.2f}x (goal <= 1.10x: {verdict(plan[1][2] <= 1.10)})")
        decode = decoding_table(sizes, batches, models, clock)
        print_table(f"Beam 5, every hypothesis forced to {sizes.decode_steps} decoder steps (random weights)",
                    "sentences/s", "ours sentences/s / theirs", decode)
        print(f"ours / HF generate sentences/s: {decode[1][2]:.2f}x (goal >= 1.5x: {verdict(decode[1][2] >= 1.5)})")


if __name__ == "__main__":
    main()
