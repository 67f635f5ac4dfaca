/* Tiny test helpers for the C API tests: CHECK(expr == code). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures = 0;

#define EXPECT(call, code)                                                   \
    do {                                                                     \
        int got_ = (call);                                                   \
        if (got_ != (code)) {                                                \
            char msg_[256];                                                  \
            fastio_last_error_message(msg_, sizeof msg_);                    \
            fprintf(stderr, "%s:%d: %s gave %d (%s: %s), expected %d\n",     \
                    __FILE__, __LINE__, #call, got_,                         \
                    fastio_status_string(got_), msg_, (code));               \
            failures++;                                                      \
        }                                                                    \
    } while (0)

#define TRUE(cond)                                                           \
    do {                                                                     \
        if (!(cond)) {                                                       \
            fprintf(stderr, "%s:%d: not true: %s\n", __FILE__, __LINE__,     \
                    #cond);                                                  \
            failures++;                                                      \
        }                                                                    \
    } while (0)
