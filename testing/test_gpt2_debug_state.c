/* llm.c debug state + losses file (shared/reference's micro oracle, copied
 * into algorithms/gpt2/data).  test_gpt2_debug_state DATADIR TMPDIR */
#include "test_gpt2_common.h"

#include <math.h>

#include "tsr_check.h"
#include "tsr_core.h"
#include "tsr_gpt2_io.h"

static const char *tmpdir;

int main(int argc, char **argv)
{
    tmpdir = test_tmpdir(argc, argv);
    char ckpt[4096], dbg[4096], losses[4096];
    join(ckpt, sizeof ckpt, argv[1], "micro_init.bin");
    join(dbg, sizeof dbg, argv[1], "micro_debug_state.bin");
    join(losses, sizeof losses, argv[1], "micro_losses.txt");

    tsr_gpt2_config_t cfg;
    CHECK_RC(tsr_gpt2_checkpoint_read_config(ckpt, &cfg), 0);
    tsr_gpt2_debug_state_t st;
    CHECK_RC(tsr_gpt2_debug_state_read(dbg, &cfg, &st), 0);
    CHECK(st.B == 4 && st.T == 32 && st.V == 500 && st.num_params == 134912);
    int shifted = 1; /* y is x shifted by one inside each row */
    for (int b = 0; st.x && b < st.B; b++)
        for (int t = 0; t + 1 < st.T; t++)
            shifted &= st.y[b * st.T + t] == st.x[b * st.T + t + 1];
    CHECK(shifted);
    int finite = 1;
    double gmax = 0;
    for (size_t i = 0; st.logits && i < (size_t)st.B * st.T * st.V; i++)
        finite &= isfinite(st.logits[i]);
    for (size_t i = 0; st.grads && i < st.num_params; i++) {
        finite &= isfinite(st.grads[i]);
        gmax = fmax(gmax, fabs(st.grads[i]));
    }
    CHECK(finite && gmax > 0);
    /* the loss is near log(V) for a fresh model, and equals losses step 0 */
    CHECK(fabs(st.loss - log(500.0)) < 0.1);
    double *l = NULL;
    int nl = 0;
    CHECK_RC(tsr_gpt2_losses_read(losses, &l, &nl), 0);
    CHECK(nl == 10);
    CHECK(l && fabs(l[0] - st.loss) < 1e-6);
    CHECK(l && fabs(l[9] - 5.988156796) < 1e-12);
    printf("micro debug state: B %d T %d V %d, loss %.9f; %d losses, %.9f .. %.9f\n", st.B, st.T,
           st.V, st.loss, nl, l ? l[0] : 0, l ? l[nl - 1] : 0);
    free(l);
    tsr_gpt2_debug_state_free(&st);

    /* wrong model: the size check refuses it */
    tsr_gpt2_config_t other = cfg;
    other.C = 32;
    capture_begin(tmpdir);
    int rc = tsr_gpt2_debug_state_read(dbg, &other, &st);
    const char *msg = capture_end();
    CHECK_RC(rc, TSR_EFORMAT);
    CHECK(has_all(msg, "micro_debug_state.bin", "different model"));
    CHECK(st.x == NULL && st.grads == NULL);
    other = cfg;
    other.maxT = 16; /* T = 32 > maxT */
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_debug_state_read(dbg, &other, &st), TSR_EFORMAT);
    capture_end();

    /* malformed files */
    size_t n = 0;
    unsigned char *good = read_file(dbg, &n);
    unsigned char *buf = malloc(n);
    int32_t *h = (int32_t *)buf;
    char p[4096];
    struct {
        const char *name;
        size_t bytes;
        int field, value, code;
        const char *needle;
    } cases[] = {
        {"dbg_missing.bin", 0, -1, 0, TSR_EIO, "cannot open"},
        {"dbg_header.bin", 200, -2, 0, TSR_EFORMAT, "truncated"},
        {"dbg_truncated.bin", 0, -2, 0, TSR_EFORMAT, "truncated"},
        {"dbg_magic.bin", 0, 0, 20240326, TSR_EFORMAT, "bad magic"},
        {"dbg_version.bin", 0, 1, 1, TSR_EFORMAT, "bad version"},
        {"dbg_batch.bin", 0, 2, 0, TSR_EFORMAT, "inconsistent header"},
        {"dbg_token.bin", 0, 256, 500, TSR_EFORMAT, "out of range"},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        join(p, sizeof p, tmpdir, cases[c].name);
        memcpy(buf, good, n);
        size_t bytes = cases[c].bytes ? cases[c].bytes : n;
        if (cases[c].field == -2 && !cases[c].bytes)
            bytes = n - 100;
        if (cases[c].field >= 0)
            h[cases[c].field] = cases[c].value;
        if (cases[c].field != -1)
            CHECK(write_file(p, buf, bytes) == 0);
        capture_begin(tmpdir);
        rc = tsr_gpt2_debug_state_read(p, &cfg, &st);
        msg = capture_end();
        CHECK_RC(rc, cases[c].code);
        check_message(msg, cases[c].name, cases[c].needle);
    }
    free(buf);
    free(good);

    /* losses files */
    const struct {
        const char *name, *text;
        int code;
        const char *needle;
    } lcases[] = {
        {"loss_ok.txt", "0 1.5\n1 1.25\n\n2 1.0", 0, NULL},
        {"loss_order.txt", "0 1.5\n2 1.25\n", TSR_EFORMAT, "expected 1"},
        {"loss_garbage.txt", "0 1.5\n1 abc\n", TSR_EFORMAT, "line 2"},
        {"loss_empty.txt", "", TSR_EFORMAT, "no \"step loss\""},
    };
    for (size_t c = 0; c < sizeof lcases / sizeof lcases[0]; c++) {
        join(p, sizeof p, tmpdir, lcases[c].name);
        CHECK(write_file(p, lcases[c].text, strlen(lcases[c].text)) == 0);
        if (lcases[c].code)
            capture_begin(tmpdir);
        rc = tsr_gpt2_losses_read(p, &l, &nl);
        if (lcases[c].code) {
            msg = capture_end();
            CHECK(has_all(msg, lcases[c].name, lcases[c].needle));
            CHECK(l == NULL);
        } else {
            CHECK(nl == 3 && l[2] == 1.0);
            free(l);
        }
        CHECK_RC(rc, lcases[c].code);
    }
    join(p, sizeof p, tmpdir, "loss_missing.txt");
    capture_begin(tmpdir);
    CHECK_RC(tsr_gpt2_losses_read(p, &l, &nl), TSR_EIO);
    capture_end();
    return tsr_check_report("test_gpt2_debug_state");
}
