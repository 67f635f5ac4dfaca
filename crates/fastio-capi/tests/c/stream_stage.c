/* A streaming C operator: every frame of `v` (uint32), one stage further
 * (every word + 1, fio-streamop's rule), into `w`. Checks the null
 * arguments of the frame functions on the first frame. */
#include "clara_fastio.h"
#include "check.h"

int main(void) {
    fastio_operator *op = NULL;
    EXPECT(fastio_operator_from_env(&op), FASTIO_OK);
    if (!op) return 2;
    EXPECT(fastio_operator_next_frame(op, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_operator_next_frame(NULL, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    fastio_frame *f = NULL;
    int frames = 0, code;
    while ((code = fastio_operator_next_frame(op, &f)) == FASTIO_OK) {
        const void *in = NULL;
        size_t in_bytes = 0, ndim = 0;
        const size_t *shape = NULL;
        if (frames == 0) {
            EXPECT(fastio_frame_input(f, "v", NULL, &in_bytes, &shape, &ndim), FASTIO_ERR_INVALID_ARGUMENT);
            EXPECT(fastio_frame_input(f, "nope", &in, &in_bytes, &shape, &ndim), FASTIO_ERR_NOT_FOUND);
            EXPECT(fastio_frame_output(f, "w", NULL, 2, NULL, NULL), FASTIO_ERR_INVALID_ARGUMENT);
            EXPECT(fastio_frame_seq(NULL, NULL, NULL), FASTIO_ERR_INVALID_ARGUMENT);
        }
        EXPECT(fastio_frame_input(f, "v", &in, &in_bytes, &shape, &ndim), FASTIO_OK);
        uint64_t seq = 0, ts = 0;
        EXPECT(fastio_frame_seq(f, &seq, &ts), FASTIO_OK);
        TRUE(seq == (uint64_t)frames && ts > 0);
        void *out = NULL;
        size_t out_bytes = 0;
        EXPECT(fastio_frame_output(f, "w", shape, ndim, &out, &out_bytes), FASTIO_OK);
        TRUE(out_bytes == in_bytes);
        if (out && in && out_bytes == in_bytes) {
            const uint32_t *a = in;
            uint32_t *b = out;
            for (size_t i = 0; i < in_bytes / 4; i++) b[i] = a[i] + 1;
        }
        EXPECT(fastio_frame_done(f), FASTIO_OK);
        frames++;
    }
    EXPECT(code, FASTIO_END_OF_STREAM);
    TRUE(strcmp(fastio_status_string(FASTIO_END_OF_STREAM), "end of stream") == 0);
    EXPECT(fastio_frame_done(NULL), FASTIO_ERR_INVALID_ARGUMENT);
    fastio_operator_release(op);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("c stage: %d frames\n", frames);
    return 0;
}
