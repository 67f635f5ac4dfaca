/* A streaming C sink whose two inputs share the local name `out` (from m1,
 * a source, and m2, one stage further): asking for `out` is an invalid
 * argument whose message names both entries; the entry names give each
 * producer's frames (word 0 counts the stages a frame went through). */
#include "clara_fastio.h"
#include "check.h"

int main(void) {
    fastio_operator *op = NULL;
    EXPECT(fastio_operator_from_env(&op), FASTIO_OK);
    if (!op) return 2;
    fastio_frame *f = NULL;
    int frames = 0, code;
    while ((code = fastio_operator_next_frame(op, &f)) == FASTIO_OK) {
        const void *in = NULL;
        size_t in_bytes = 0, ndim = 0;
        const size_t *shape = NULL;
        EXPECT(fastio_frame_input(f, "out", &in, &in_bytes, &shape, &ndim), FASTIO_ERR_INVALID_ARGUMENT);
        if (frames == 0) {
            char msg[512];
            fastio_last_error_message(msg, sizeof msg);
            TRUE(strstr(msg, "\"m1/out\"") != NULL && strstr(msg, "\"m2/out\"") != NULL);
            printf("c sink: %s\n", msg);
        }
        EXPECT(fastio_frame_input(f, "m2/out", &in, &in_bytes, &shape, &ndim), FASTIO_OK);
        TRUE(in != NULL && in_bytes >= 4 && ((const uint32_t *)in)[0] == 1);
        EXPECT(fastio_frame_input(f, "M1/OUT", &in, &in_bytes, &shape, &ndim), FASTIO_OK);
        TRUE(in != NULL && in_bytes >= 4 && ((const uint32_t *)in)[0] == 0);
        EXPECT(fastio_frame_done(f), FASTIO_OK);
        frames++;
    }
    EXPECT(code, FASTIO_END_OF_STREAM);
    fastio_operator_release(op);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("c sink: %d frames\n", frames);
    return 0;
}
