"""The GPT Lab page's panels, one module per thing it shows; ``views/lab.py`` lays them out.

* :mod:`ui.lab.session`: the one owner of the reader's state (:class:`~ui.lab.session.LabSession`);
* :mod:`ui.lab.words`: words the panels share (escaped text, counts, losses, durations, run names);
* :mod:`ui.lab.shipped`: the shipped measurement files, read through ``engine.lab.results``;
* :mod:`ui.lab.corpus` (section 1), :mod:`ui.lab.controls` (2), :mod:`ui.lab.train` (3),
  :mod:`ui.lab.model` (the model in use and its diagram), :mod:`ui.lab.generate` (4),
  :mod:`ui.lab.inside` (5), :mod:`ui.lab.experiments` (6).

Every visible string goes through :func:`ui.i18n._`; the engine's stable keys (job states, stop
reasons, refusal keys, upload problems, checkpoint reasons, experiment and run keys) are translated
here and nowhere else.
"""
