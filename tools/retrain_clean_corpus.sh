#!/usr/bin/env bash
# Rebuilds, from the clean Tang corpus (engine/corpus/build.py, rule 2), everything shipped that depends on the
# corpus, into a staging folder, resumably: run the same command again and it skips what is done.
#
#   nice -n 19 tools/retrain_clean_corpus.sh [STAGE]      (default STAGE: runs/clean_corpus, git-ignored)
#
# STAGE/code      the code at the commit recorded in STAGE/commit (git archive), frozen: the runs never see later
#                 edits; its assets/corpus/tang.jsonl.xz is replaced by the clean build (TARBALL=path reuses an
#                 `npm pack chinese-poetry@2.0.1` tarball, else npm fetches it).
# STAGE/out       what the switch copies into assets/: models/course_tang/{checkpoint.json,model.safetensors,
#                 whole_split.json}, lab_exercises.json (27 paired runs with ALiBi's), lab_dropout.json.
# STAGE/state     engine.train's --resume state of course_tang (written after every evaluation).
# staging/clean_corpus/lab_exercises.json (tracked), when there: the exercise runs an earlier session finished,
#                 the starting point of STAGE/out/lab_exercises.json in a fresh STAGE.
# Two lanes run at once, one torch thread each: (A) course_tang, then its whole-split loss; (B) the exercise
# runs (engine.lab.experiments stores each finished run), then the dropout runs (the commit 6e8651c's command
# that made assets/lab_dropout.json, on the clean asset). PIDS (default STAGE/pids) lists the processes of the
# run, one per line, refreshed every 30 s (for a SIGSTOP/SIGCONT during a measurement). docs/operations.md.
set -euo pipefail
REPO=${REPO:-$(cd "$(dirname "$0")/.." && pwd)}
STAGE=$(mkdir -p "${1:-$REPO/runs/clean_corpus}" && cd "${1:-$REPO/runs/clean_corpus}" && pwd)
if [ "${RETRAIN_COPY:-}" != 1 ]; then  # bash reads a script as it runs: run a copy that no checkout edits
  cp "$0" "$STAGE/retrain.sh.tmp" && mv "$STAGE/retrain.sh.tmp" "$STAGE/retrain.sh"
  RETRAIN_COPY=1 REPO="$REPO" exec bash "$STAGE/retrain.sh" "$STAGE"
fi
PY=${PY:-$REPO/.venv/bin/python}
PIDS=${PIDS:-$STAGE/pids}
DROPOUT_COMMIT=6e8651cc4c1b4be9bb515dae45fd1c406d19e888
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1
log() { echo "$(date -u +%FT%TZ) $*"; }

[ -f "$STAGE/commit" ] || git -C "$REPO" rev-parse HEAD > "$STAGE/commit"
COMMIT=$(cat "$STAGE/commit")
unpack() {  # unpack COMMIT DIR: the commit's files, once
  [ -d "$2" ] || { rm -rf "$2.tmp"; mkdir -p "$2.tmp"; git -C "$REPO" archive "$1" | tar -x -C "$2.tmp"; mv "$2.tmp" "$2"; }
}
unpack "$COMMIT" "$STAGE/code"
mkdir -p "$STAGE/out/models" "$STAGE/state"
( while :; do  # every process of this run's process group
    ps -eo pid=,pgid= | awk -v g="$(ps -o pgid= $$ | tr -d ' ')" '$2 == g {print $1}' > "$PIDS.tmp" && mv "$PIDS.tmp" "$PIDS"
    kill -0 $$ 2>/dev/null || exit 0; sleep 30
  done ) &

cd "$STAGE/code"
if [ ! -f "$STAGE/asset.sha256" ]; then
  log "building the clean asset"
  "$PY" -m engine.corpus build --out assets/corpus/tang.jsonl.xz ${TARBALL:+--tarball "$TARBALL"}
  sha256sum assets/corpus/tang.jsonl.xz | cut -d' ' -f1 > "$STAGE/asset.sha256"
fi
log "clean asset $(cat "$STAGE/asset.sha256"), code $COMMIT"

lane_model() {
  local out="$STAGE/out/models/course_tang"
  if [ ! -f "$out/checkpoint.json" ]; then
    log "A: course_tang (5000 steps of batch 32)"
    "$PY" -m engine.train --preset course --corpus tang --steps 5000 --batch-size 32 --lr 2e-3 --warmup-steps 100 \
      --dropout 0.0 --eval-interval 100 --eval-iters 10 --log-interval 50 --threads 1 \
      --out "$out" --resume "$STAGE/state/course_tang"
  fi
  if [ ! -f "$out/whole_split.json" ]; then
    log "A: whole-split validation loss"
    "$PY" - "$out" <<'PYEOF'
import hashlib, json, sys
from pathlib import Path
from engine.checkpoint import load_checkpoint
from engine.corpus import load_corpus
from engine.lab.experiments.measurement import split_loss
folder = Path(sys.argv[1])
loss = split_loss(load_checkpoint(folder).model, load_corpus("tang").val_ids)
data = {"format": "lab-whole-split/1", "model": "course_tang",
        "model_sha256": hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest(),
        "split": "val", "val_loss": round(loss.mean, 5), "windows": loss.windows, "tokens": loss.tokens,
        "method": "engine.lab.experiments.measurement.split_loss(model, load_corpus('tang').val_ids): every "
                  "non-overlapping window of block_size characters, eval mode"}
(folder / "whole_split.json").write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")
PYEOF
  fi
  log "A: done"
}

lane_runs() {
  local seed="$REPO/staging/clean_corpus/lab_exercises.json"  # runs finished in an earlier session, committed
  if [ ! -f "$STAGE/out/lab_exercises.json" ] && [ -f "$seed" ]; then cp "$seed" "$STAGE/out/lab_exercises.json"; fi
  log "B: exercise runs"
  "$PY" -m engine.lab.experiments --out "$STAGE/out/lab_exercises.json" --seeds 1,2,3 --jobs 1 --threads 1
  if [ ! -f "$STAGE/out/lab_dropout.json" ]; then
    log "B: dropout runs (code of $DROPOUT_COMMIT)"
    unpack "$DROPOUT_COMMIT" "$STAGE/code_dropout"
    cp assets/corpus/tang.jsonl.xz "$STAGE/code_dropout/assets/corpus/tang.jsonl.xz"
    (cd "$STAGE/code_dropout" && "$PY" -m engine.lab.experiments --corpus tang --seeds 1,2,3 --steps 1000 \
      --batch-size 4 --experiments dropout --eval-batches 160 --threads 1 --out "$STAGE/out/lab_dropout.json.part" \
      && mv "$STAGE/out/lab_dropout.json.part" "$STAGE/out/lab_dropout.json")
  fi
  log "B: done"
}

lane_model & a=$!
lane_runs & b=$!
status=0
wait $a || status=1
wait $b || status=1
log "finished (status $status); what is in $STAGE/out is what the switch copies"
exit $status
