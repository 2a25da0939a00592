"""The recipes of the Lab's notebook (:mod:`engine.notebooks`): train the course's GPT on a slice of the reader's
corpus with the reader's settings, beside the slice's counting baselines, draw the loss chart and one attention
map of the trained model, and generate.

The slice is :data:`LAB_RECORDS` records drawn evenly through the corpus (``ui.notebook`` takes them), not its
first ones: the Tang file is ordered by author, and its first 300 records are ritual verse repeated with small
changes, which a model learns by heart. The training stops early once the validation loss has risen
(``engine.training.EarlyStop``), so a slice smaller than the reader's settings need still ends near its best.
"""

from __future__ import annotations

import dataclasses

from engine import chapter
from engine.baselines import corpus_baselines
from engine.corpus import RECORD_SEPARATOR, corpus_from_text
from engine.figures.core import SEPARATORS
from engine.figures.lab import AttentionLabels, LossLabels, attention_slider, loss_chart
from engine.gpt import GPTConfig
from engine.lab.generation import generate
from engine.lab.internals import attention_maps
from engine.lab.models import LabModel
from engine.lab.poem_forms import FormError, PoemForm
from engine.notebooks.core import say, show
from engine.training import EarlyStop, TrainConfig, train

#: The recipe's defaults: a two-poem corpus, the default GPT (its vocab_size taken from the corpus) and training
#: configs as plain dicts.
LAB_RECORDS = ["白日依山尽\n黄河入海流\n欲穷千里目\n更上一层楼", "床前明月光\n疑是地上霜\n举头望明月\n低头思故乡"]
LAB_MODEL = {k: v for k, v in dataclasses.asdict(GPTConfig()).items() if k != "vocab_size"}  # the corpus's, later
LAB_TRAINING = dataclasses.asdict(TrainConfig())
#: The model the training cell trains (its generation and attention cells read it).
lab_model: LabModel | None = None


def lab_training(corpus_records: list = LAB_RECORDS, model: dict = LAB_MODEL, training: dict = LAB_TRAINING,
                 patience: int = 2, number_separators: str = SEPARATORS):
    """The course's GPT trained on ``corpus_records`` with the Lab's settings, stopped early after ``patience``
    evaluations in a row above the best validation loss (0: never); its losses beside the slice's unigram and
    bigram baselines, printed and drawn."""
    corpus = corpus_from_text(RECORD_SEPARATOR.join(corpus_records), "slice")
    baselines = corpus_baselines(corpus)
    config = GPTConfig(**{**model, "vocab_size": corpus.vocab_size,
                          "block_size": min(model["block_size"], corpus.max_block_size)})
    watch = EarlyStop(int(patience))
    result = train(config, corpus, TrainConfig(**training), callbacks=watch, stop=watch)
    global lab_model
    lab_model = LabModel.from_result(result)
    history = result.history
    show("unigram.val_loss", baselines.unigram.val_nats)
    show("bigram.val_loss", baselines.bigram.val_nats)
    say("steps", history["step"].tolist())
    show("train_loss", history["train_loss"].tolist())
    show("val_loss", history["val_loss"].tolist())
    show("best_val_loss", watch.best)
    say("stopped_early_at", watch.stopped_at)
    below = history[history["val_loss"] < baselines.bigram.val_nats]
    crossing = None if below.empty else (int(below["step"].iloc[0]), float(below["val_loss"].iloc[0]))
    words = LossLabels(title="", batch="step_losses", train="train_loss", val="val_loss", step="step",
                       loss="nats", crossed="val_loss < bigram", separators=number_separators)
    loss_chart(history[["step", "train_loss", "val_loss"]].to_numpy(), result.step_losses, int(training["steps"]),
               words, baselines={"unigram": baselines.unigram.val_nats, "bigram": baselines.bigram.val_nats},
               crossing=crossing).show()


def lab_generation(prompt: str = chapter.LESSON_PROMPT, temperature: float = 0.8, top_k: int = 20,
                   top_p: float = 1.0, length: int = 64, sampling_seed: int = 0, line_length: int = 0,
                   n_lines: int = 0):
    """The model trained above continues the prompt with the Lab's sampling settings (top_k 0: every character;
    line_length and n_lines 0: free)."""
    form = PoemForm(line_length or None, n_lines or None) if line_length or n_lines else None
    try:
        generation = generate(lab_model, prompt, int(length), float(temperature), int(top_k) or None,
                              int(sampling_seed), top_p=float(top_p), form=form)
        say("generated", generation.new)
    except FormError as error:
        say("form_refused", error.reason)


def lab_attention(line: str = chapter.LESSON_LINE, number_separators: str = SEPARATORS):
    """Every layer's and head's attention weights of the model trained above on a line, one map per head (the
    slider under the map goes from head to head)."""
    maps = attention_maps(lab_model, line)
    show("row_sum", maps.row_sum)
    say("tokens", list(maps.tokens))
    if maps.tokens:
        words = AttentionLabels(title="attn_weights", step="layer {layer} · head {head}", query="query",
                                key="key", separators=number_separators)
        attention_slider(maps.attn_weights, list(maps.tokens), words).show()


RECIPES = {"TrainingJob._work": lab_training, "generate": lab_generation, "attention_maps": lab_attention}
