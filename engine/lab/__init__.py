"""The GPT Lab's engine, in modules that depend one way.

* :mod:`engine.lab.settings`: the Lab's rules (head counts that divide n_embd, the caps, the checks
  that must pass before a training starts);
* :mod:`engine.lab.results`: the shipped measurement files (experiment results, the dropout price)
  read into frozen dataclasses, and their names and formats;
* :mod:`engine.lab.models`: a model the Lab holds (:class:`~engine.lab.models.LabModel`), the shipped
  one, uploads;
* :mod:`engine.lab.poem_forms`: poem forms imposed while sampling (five or seven characters, even lines);
* :mod:`engine.lab.generation`: a reader's prompt checked and cropped, and its continuation;
* :mod:`engine.lab.loops`: the loops greedy decoding falls into;
* :mod:`engine.lab.internals`: looking inside (attention maps, the position table, the next character);
* :mod:`engine.lab.experiments`: the lesson's experiments (``python -m engine.lab.experiments``);
* :mod:`engine.lab.jobs`: background jobs (training, paired reruns of the exercises) and their progress;
* :mod:`engine.lab.runner`: the app-wide runner (registry of finished models, one training slot).

Each module imports only those listed before it (``tests/test_architecture.py`` checks it). Nothing
here imports Streamlit or holds a sentence for the reader: results are data and stable keys, and
``ui.lab`` says the words.
"""
