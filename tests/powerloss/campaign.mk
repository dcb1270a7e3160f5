# SPDX-License-Identifier: MIT
# tests/powerloss/campaign.mk: the campaign of power cuts against pulsed
# (tests/powerloss/campaign.py; docs/Storage.md "Power cuts").
#
# make check runs the short campaign: a self-check (a sabotaged run must
# fail), then 40 cuts in 5 lives of 8, seed 1. It exits 77 naming the reason
# when plfs is not built, /dev/fuse is missing or it does not run as root.
# The long one:
#
#   make powerloss-campaign ROUNDS=1000 [SEED=n]
#
# goes on after a failing life (--keep-going) and prints every failure's
# seed and round; each failing life's directory is kept for forensics.
# 40_meta_new_log.py: the regression test of a cut right after LevelDB
# started a new log file (src/meta/meta.c, sync_new_log).
POWERLOSS_CAMPAIGN = tests/powerloss/campaign.py tests/powerloss/40_meta_new_log.py
TESTS += $(POWERLOSS_CAMPAIGN)
EXTRA_DIST += $(POWERLOSS_CAMPAIGN)

powerloss-campaign: all
	@r='$(ROUNDS)'; s='$(SEED)'; \
	$(AM_TESTS_ENVIRONMENT) $(PY_LOG_COMPILER) $(srcdir)/tests/powerloss/campaign.py \
	  --keep-going --rounds "$${r:-1000}" $${s:+--seed "$$s"}

.PHONY: powerloss-campaign
