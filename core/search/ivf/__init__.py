"""The semantic index: an inverted file over the sign codes (spec 000, "The first stage is an index over
the codes").

- `kmeans.py`   k-means in Hamming space: integer popcounts, majority-vote centroids, fixed tie breaks;
- `measure.py`  the recall floor curve and the measurement that decides how many lists a search reads
                (the evaluation's own method, shared with `crewlet search eval`);
- `store.py`    the index as replicated state: its records on the vector log and how a node applies them;
- `training.py` one training over a node's own rows: read, cluster, file, measure;
- `duty.py`     the background duty that trains, re-measures and re-files it.
"""

MIN_SOURCES = 1024            # a corpus below this has no index at all (here: a status reads it without numpy)
