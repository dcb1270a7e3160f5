/* SPDX-License-Identifier: MIT */
/*
 * check_recovery.c - recovery on really damaged files (storage contract
 * sections 7 and 8): torn tails at every byte, flipped bytes everywhere in
 * the last batch, snapshot fast path equal to the full scan, bad snapshots,
 * a torn delta tail after a good snapshot, missing/short/wrong indexes, a
 * corrupt sealed segment, leftover temp files.
 *
 * One binary made of one file per concern, whose test cases this file
 * gathers: recovery_tail.c (the active segment's tail), recovery_snapshot.c
 * (the snapshot fast path and the checkpoint), recovery_damage.c (indexes,
 * sealed segments, the damage record). Shared helpers: recoverytest.h.
 */
#include "recoverytest.h"

#include "faultio.h"

int main(void)
{
    g_fio = faultio_create();
    faultio_set_sync_noop(g_fio, true);
    Suite *s = suite_create("recovery");
    suite_add_tcase(s, recovery_tail_tcase());
    suite_add_tcase(s, recovery_snapshot_tcase());
    suite_add_tcase(s, recovery_damage_tcase());
    int rc = pt_run(s);
    faultio_destroy(g_fio);
    return rc;
}
