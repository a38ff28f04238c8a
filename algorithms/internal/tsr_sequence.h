/* The calls on the caller's arrays and their sequence (algorithms/sequence.c);
 * not installed. A call states its arrays as a table; tsr_sequence_views
 * gives each one its descriptor over the caller's memory, the sequence's
 * own when an earlier call saw the same array the same way. */
#ifndef TSR_SEQUENCE_INTERNAL_H
#define TSR_SEQUENCE_INTERNAL_H

#include "tsr_algorithms.h"

/* One array of a call: b x (m x n) column-major with leading dimension ld
 * (tsr_desc_create_user's layout) in tiles bb x mb x nb; written: the call
 * writes it. desc: set by tsr_sequence_views. */
typedef struct {
    const char *name;
    tsr_dtype_t dtype;
    int b, m, n, bb, mb, nb, ld;
    const void *ptr;
    int written;
    tsr_desc_t *desc;
} tsr_array_t;

/* Whether two arrays' memory overlaps (their spans: first to last element). */
int tsr_arrays_overlap(const tsr_array_t *x, const tsr_array_t *y);
/* TSR_EINVAL with a message for a NULL array, a leading dimension below its
 * rows, or a written array that overlaps another array of the call (its
 * tasks would read what others overwrite). */
int tsr_check_arrays(const char *fn, const tsr_array_t *arrays, int n);
/* Start a call of fn in seq: TSR_EINVAL (seq NULL, several ranks), or the
 * error an earlier call left in seq (the call then submits nothing). */
int tsr_sequence_begin(tsr_sequence_t *seq, const char *fn);
/* Descriptors for the call's arrays (after tsr_check_arrays): the
 * sequence's view of the same memory, shape, ld and tiles when it has one,
 * else a new one (an overlapping view that either writes first waits for
 * its tasks and is released). */
int tsr_sequence_views(tsr_sequence_t *seq, tsr_array_t *arrays, int n);
/* The sequence destroys d when it waits (a temporary of a call). */
int tsr_sequence_adopt(tsr_sequence_t *seq, tsr_desc_t *d);
/* Keep the call's return code: the first error stays. Returns rc. */
int tsr_sequence_record(tsr_sequence_t *seq, int rc);
#endif
