# Sourced by the bench scripts that train on all of our own self-play (quality_selfplay.sh,
# teacher_quality.sh, engine_strength.sh): sets SP (the folder of .plain dumps), SP_FILES (its
# .plain and .plain.zst files) and SP_FULL (1: the full set the tracked results were measured on).
#   SELFPLAY=DIR           a folder of .plain[.zst] dumps of your own;
#   else ../shared/data/selfplay, all of our self-play (about 826k positions, 66 MB), which sits
#                          beside a clone in the project's workspace but is not in the repo;
#   else data/demo         the 2,400 games the repo ships (268,884 positions), with a note: the
#                          figures then differ from bench/results/, which SAVE=1 refuses to overwrite.
if [ -n "${SELFPLAY:-}" ]; then
  SP=$SELFPLAY; SP_FULL=0
elif ls ../shared/data/selfplay/*.plain ../shared/data/selfplay/*.plain.zst >/dev/null 2>&1; then
  SP=../shared/data/selfplay; SP_FULL=1
else
  SP=data/demo; SP_FULL=0
  echo "note: ../shared/data/selfplay (all of our self-play, about 826k positions) is not beside this clone;" \
       "running on the repo's data/demo (2,400 games, 268,884 positions) instead: the figures differ from" \
       "bench/results/; SELFPLAY=DIR names another folder of .plain dumps" >&2
fi
if [ "${SAVE:-0}" = 1 ] && [ "$SP_FULL" != 1 ]; then
  echo "SAVE=1 replaces the tracked results, which were measured on ../shared/data/selfplay; not with $SP" >&2
  exit 2
fi
shopt -s nullglob
SP_FILES=("$SP"/*.plain "$SP"/*.plain.zst)
shopt -u nullglob
if [ ${#SP_FILES[@]} -eq 0 ]; then
  echo "no .plain or .plain.zst dumps in $SP (SELFPLAY=DIR names a folder of them)" >&2
  exit 2
fi
