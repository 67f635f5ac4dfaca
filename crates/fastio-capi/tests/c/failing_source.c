/* A streaming C source that fails at frame FAIL_AT: frames before it are
 * fio-streamop's (word 0 counts stages, word i is seq * 2654435761 + i);
 * at FAIL_AT it releases the operator without finishing the frame and
 * exits 1, as a C operator that hits an error would. */
#include <stdint.h>
#include "clara_fastio.h"
#include "check.h"

int main(void) {
    const char *at = getenv("FAIL_AT");
    uint64_t fail_at = at ? strtoull(at, NULL, 10) : UINT64_MAX;
    fastio_operator *op = NULL;
    EXPECT(fastio_operator_from_env(&op), FASTIO_OK);
    if (!op) return 2;
    fastio_frame *f = NULL;
    int code;
    while ((code = fastio_operator_next_frame(op, &f)) == FASTIO_OK) {
        uint64_t seq = 0, ts = 0;
        EXPECT(fastio_frame_seq(f, &seq, &ts), FASTIO_OK);
        if (seq == fail_at) {
            fprintf(stderr, "failing on purpose at frame %llu\n", (unsigned long long)seq);
            fastio_frame_done(f);
            fastio_operator_release(op);
            return 1;
        }
        size_t shape[2] = {1, 64};
        void *out = NULL;
        size_t bytes = 0;
        EXPECT(fastio_frame_output(f, "v", shape, 2, &out, &bytes), FASTIO_OK);
        if (out && bytes == 64 * 4) {
            uint32_t *w = out;
            w[0] = 0;
            for (uint32_t i = 1; i < 64; i++) w[i] = (uint32_t)seq * 2654435761u + i;
        }
        EXPECT(fastio_frame_done(f), FASTIO_OK);
    }
    fastio_operator_release(op);
    return failures ? 1 : 0;
}
