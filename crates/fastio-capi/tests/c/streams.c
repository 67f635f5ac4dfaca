/* Streams from C without a pipeline (fastio.h): a producer and two
 * consumer processes (fork, attach by the context's handle), frames of
 * varying shape checked word by word, the end of the stream, a poisoned
 * stream, and the error paths. */
#include <stdint.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fastio.h"
#include "check.h"

#define FRAMES 1000
#define ROWS 8
#define COLS 16

static uint32_t value(uint64_t seq, size_t i) { return (uint32_t)(seq * 2654435761u + i); }

static size_t rows_of(uint64_t seq) { return 1 + seq % ROWS; }

/* Reads every frame of `stream` as consumer `index`; exits non-zero on a
 * wrong byte, a gap, or an end other than `want_end`. */
static int consume(const char *handle, const char *stream, size_t index, int want_end) {
    fastio_context *ctx = NULL;
    EXPECT(fastio_context_attach(handle, &ctx), FASTIO_OK);
    fastio_stream_consumer *c = NULL;
    EXPECT(fastio_stream_consumer_attach(ctx, stream, index, &c), FASTIO_OK);
    uint64_t expect = 0;
    fastio_stream_frame *f = NULL;
    int code;
    while ((code = fastio_stream_next(c, 30000, &f)) == FASTIO_OK) {
        uint64_t seq = 0, ts = 0;
        EXPECT(fastio_stream_frame_seq(f, &seq, &ts), FASTIO_OK);
        TRUE(seq == expect && ts > 0);
        const size_t *shape = NULL;
        size_t ndim = 0;
        EXPECT(fastio_stream_frame_shape(f, &shape, &ndim), FASTIO_OK);
        TRUE(ndim == 2 && shape[0] == rows_of(seq) && shape[1] == COLS);
        const void *data = NULL;
        size_t n = 0;
        EXPECT(fastio_stream_frame_bytes(f, &data, &n), FASTIO_OK);
        TRUE(n == rows_of(seq) * COLS * 4);
        const uint32_t *w = data;
        for (size_t i = 0; i < n / 4; i++) {
            if (w[i] != value(seq, i)) {
                fprintf(stderr, "frame %llu word %zu: %u\n", (unsigned long long)seq, i, w[i]);
                failures++;
                break;
            }
        }
        fastio_stream_frame_release(f);
        expect++;
    }
    EXPECT(code, want_end);
    TRUE(expect == FRAMES);
    fastio_stream_consumer_free(c);
    fastio_context_release(ctx);
    return failures == 0 ? 0 : 1;
}

/* Publishes FRAMES frames, zero copy; then ends the stream when `end`,
 * else poisons it. */
static void produce(fastio_stream_producer *p, int end) {
    for (uint64_t seq = 0; seq < FRAMES; seq++) {
        size_t shape[2] = {rows_of(seq), COLS};
        void *slot = NULL;
        size_t n = 0;
        EXPECT(fastio_stream_begin(p, shape, 2, 30000, &slot, &n), FASTIO_OK);
        TRUE(n == shape[0] * COLS * 4);
        uint32_t *w = slot;
        for (size_t i = 0; i < n / 4; i++) w[i] = value(seq, i);
        uint64_t got = 99;
        EXPECT(fastio_stream_publish(p, &got), FASTIO_OK);
        TRUE(got == seq);
    }
    EXPECT(end ? fastio_stream_end(p) : fastio_stream_poison(p), FASTIO_OK);
}

/* Two consumers in child processes; the parent produces. */
static void run(fastio_context *ctx, const char *handle, const char *stream, int end) {
    size_t max[2] = {ROWS, COLS};
    fastio_stream_producer *p = NULL;
    EXPECT(fastio_stream_create(ctx, stream, "uint32", max, 2, 4, 2, FASTIO_OVERFLOW_BLOCK, &p), FASTIO_OK);
    pid_t kids[2];
    for (size_t k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) _exit(consume(handle, stream, k, end ? FASTIO_END_OF_STREAM : FASTIO_ERR_POISONED));
    }
    produce(p, end);
    fastio_stream_producer_free(p);
    for (size_t k = 0; k < 2; k++) {
        int status = 0;
        TRUE(waitpid(kids[k], &status, 0) == kids[k]);
        TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

int main(void) {
    fastio_context *ctx = NULL;
    EXPECT(fastio_context_create(16 << 20, &ctx), FASTIO_OK);
    char handle[256];
    size_t len = 0;
    EXPECT(fastio_context_handle(ctx, handle, sizeof handle, &len), FASTIO_OK);

    run(ctx, handle, "ended", 1);
    run(ctx, handle, "abandoned", 0);

    /* Error paths: nothing is created, nothing changes. */
    size_t max[2] = {ROWS, COLS};
    fastio_stream_producer *p = NULL;
    EXPECT(fastio_stream_create(ctx, "s", "no such type", max, 2, 4, 1, 0, &p), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_stream_create(ctx, "s", "uint8", max, 2, 4, 1, 7, &p), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_stream_create(ctx, "s", "uint8", NULL, 2, 4, 1, 0, &p), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_stream_create(ctx, "s", "uint8", max, 2, 0, 1, 0, &p), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_stream_create(ctx, "s", "uint8", max, 2, 4, 1, 0, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_stream_create(NULL, "s", "uint8", max, 2, 4, 1, 0, &p), FASTIO_ERR_INVALID_ARGUMENT);
    TRUE(p == NULL);
    fastio_stream_consumer *c = NULL;
    EXPECT(fastio_stream_consumer_attach(ctx, "no such stream", 0, &c), FASTIO_ERR_NOT_FOUND);
    TRUE(c == NULL);

    /* Drop-oldest: one held frame per consumer; a second is refused. */
    EXPECT(fastio_stream_create(ctx, "s", "uint8", max, 2, 2, 1, FASTIO_OVERFLOW_DROP_OLDEST, &p), FASTIO_OK);
    EXPECT(fastio_stream_consumer_attach(ctx, "s", 0, &c), FASTIO_OK);
    EXPECT(fastio_stream_consumer_attach(ctx, "s", 5, &c), FASTIO_ERR_INVALID_ARGUMENT);
    fastio_stream_frame *f = NULL, *g = NULL;
    EXPECT(fastio_stream_next(c, 0, &f), FASTIO_ERR_TIMEOUT);
    size_t big[2] = {ROWS + 1, COLS};
    void *slot = NULL;
    size_t n = 0;
    EXPECT(fastio_stream_begin(p, big, 2, 0, &slot, &n), FASTIO_ERR_INVALID_ARGUMENT);
    for (int i = 0; i < 5; i++) {
        EXPECT(fastio_stream_begin(p, max, 2, 0, &slot, &n), FASTIO_OK);
        ((unsigned char *)slot)[0] = (unsigned char)i;
        EXPECT(fastio_stream_publish(p, NULL), FASTIO_OK);
    }
    EXPECT(fastio_stream_next(c, 0, &f), FASTIO_OK);
    uint64_t seq = 0, dropped = 0;
    EXPECT(fastio_stream_frame_seq(f, &seq, NULL), FASTIO_OK);
    EXPECT(fastio_stream_dropped(c, &dropped), FASTIO_OK);
    TRUE(seq == 3 && dropped == 3);
    EXPECT(fastio_stream_next(c, 0, &g), FASTIO_ERR_CONFLICT);
    fastio_stream_frame_release(f);
    EXPECT(fastio_stream_next(c, 0, &g), FASTIO_OK);
    const void *data = NULL;
    EXPECT(fastio_stream_frame_bytes(g, &data, &n), FASTIO_OK);
    TRUE(((const unsigned char *)data)[0] == 4);
    fastio_stream_frame_release(g);
    EXPECT(fastio_stream_end(p), FASTIO_OK);
    EXPECT(fastio_stream_next(c, 0, &g), FASTIO_END_OF_STREAM);
    fastio_stream_consumer_free(c);
    fastio_stream_producer_free(p);
    fastio_stream_frame_release(NULL);
    fastio_stream_consumer_free(NULL);
    fastio_stream_producer_free(NULL);

    fastio_context_release(ctx);
    if (failures) return 1;
    printf("streams: ok\n");
    return 0;
}
