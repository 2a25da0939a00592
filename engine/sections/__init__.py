"""One module per essay section: the experiments each page runs, as pure functions.

Each function takes plain values (tensors, numbers, dtypes) and returns tensors,
dicts or pandas DataFrames; the pages only draw what comes back.
"""
