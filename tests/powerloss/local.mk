# SPDX-License-Identifier: MIT
# tests/powerloss: power cuts (issue 15). plfs is a FUSE file system that
# forgets at a simulated power cut what was not made durable
# (tests/powerloss/README.md); its self-tests mount it on a temporary
# directory and prove each rule. plfs is built by `make` when configure
# found fuse3 (libfuse3-dev); without it the tests exit 77 and say why.
if HAVE_FUSE3
noinst_PROGRAMS += tests/powerloss/plfs
tests_powerloss_plfs_SOURCES = tests/powerloss/plfs.c tests/powerloss/plfs.h tests/powerloss/plfs_state.c \
	tests/powerloss/plfs_cut.c
tests_powerloss_plfs_CFLAGS = $(AM_CFLAGS) $(FUSE3_CFLAGS)
tests_powerloss_plfs_LDADD = libpulsecommon.a $(FUSE3_LIBS)
endif

POWERLOSS_TESTS = \
	tests/powerloss/10_plfs_files.py \
	tests/powerloss/20_plfs_dirs.py \
	tests/powerloss/30_plfs_model.py
TESTS += $(POWERLOSS_TESTS)
EXTRA_DIST += $(POWERLOSS_TESTS) tests/powerloss/plfstest.py tests/powerloss/README.md
