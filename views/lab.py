"""Page 8: the GPT lab — train the course's GPT in the page, generate, look inside, run the lesson's experiments.

The layout only: the rules live in ``engine.lab.settings``, the reader's state in
``ui.lab.session.LabSession``, each section's panels and words in ``ui.lab``.
"""

import streamlit as st

from engine import sampling as engine_sampling
from engine.device import cpu_has_amx, training_autocast_dtype
from engine.lab import experiments as lab_experiments
from engine.lab import generation, internals
from engine.lab.experiments import rerun as lab_rerun
from engine.lab.jobs import TrainingJob
from engine.lab.runner import LabRunner
from engine.training import train
from ui import notebook, page
from ui.lab import controls, corpus, experiments, generate, inside, model
from ui.lab import train as training
from ui.lab.session import LabSession, lab_runner

page.header()
lab = LabSession(lab_runner())
lab.collect_finished_job()

corpus.corpus_prose()
text = corpus.choose_corpus(lab)
if text is not None:
    corpus.corpus_numbers(text)

controls.controls_prose()
plan = controls.training_controls(lab, text)

page.prose("training")
training.training_section(lab)
page.show_code(TrainingJob._work, train, training_autocast_dtype, cpu_has_amx, LabRunner.submit)

current = model.choose_model(lab)
diagram_slot = st.container()  # the model's diagram, drawn once section 4 gives it a forward pass to show

page.prose("generate")
sampling = generate.generation_form(disabled=current is None)
if current is not None:
    generate.show_generation(current, sampling)
    generate.kv_cache(current, sampling)
    shapes = generate.next_character(current, sampling)
    if shapes is not None:
        model.model_diagram(diagram_slot, current, shapes)
page.show_code(generation.generate, generation.prepare_prompt, engine_sampling.generate_ids, internals.next_char_probs,
               internals.last_position_attention)

page.prose("inside")
inside.attention_on_a_line(current)
page.show_code(internals.attention_maps, internals.position_tables)

page.prose("experiments")
experiments.experiments_section(lab, text)
page.show_code(lab_rerun.paired_rerun, lab_rerun.comparable, lab_experiments.paired_model, lab_experiments.split_loss)

page.check_yourself()
notebook.download_button(plan=plan, corpus=text)
