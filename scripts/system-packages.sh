#!/usr/bin/env bash
# The optional Debian packages (run by install.sh; idempotent): WordNet 3.0 for synonym
# substitution (perturb.py), copied (not symlinked) into the venv's NLTK data folder, which
# perturb.py puts on nltk.data.path; the Python 3.11 docs' reST sources, the out-of-domain
# corpus of the held-out shift suite (trainspotter.evaluation.shift_suite). Installed with apt-get
# when run as root; otherwise (or without apt-get) skipped with one note saying what is
# missing and what it costs: everything else works without them.
set -euo pipefail
VENV=${1:-.venv}
debs="wordnet-base wordnet-sense-index python3.11-doc"
if ! dpkg -s $debs >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq && apt-get install -y -qq $debs >/dev/null
  else
    why=$([ "$(id -u)" = 0 ] && echo "no apt-get" || echo "not root")
    echo "note: $why: skipped the system packages $debs. Without WordNet the synonym" \
         "perturbation (--features full, benchmark --perturbations synonym) stops with one error line;" \
         "without python3.11-doc the shift suite (benchmark --suite shift) has no source pool." \
         "To add them: sudo apt-get install $debs, then rerun scripts/install.sh." >&2
  fi
fi
wn_dir="$VENV/share/nltk_data/corpora/wordnet"
if [ -d /usr/share/wordnet ] && [ ! -f "$wn_dir/lexnames" ]; then
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
