/* Contexts and allocations from C (fastio.h), with every error path. */
#include "fastio.h"
#include "check.h"

int main(void) {
    fastio_context *ctx = NULL;
    EXPECT(fastio_context_create(1 << 20, &ctx), FASTIO_OK);
    EXPECT(fastio_context_create(1 << 20, NULL), FASTIO_ERR_INVALID_ARGUMENT);

    char handle[256];
    size_t len = 0;
    EXPECT(fastio_context_handle(ctx, handle, sizeof handle, &len), FASTIO_OK);
    TRUE(len == strlen(handle) && len > 0);
    EXPECT(fastio_context_handle(ctx, handle, 3, &len), FASTIO_ERR_BUFFER_TOO_SMALL);

    fastio_allocation *a = NULL;
    EXPECT(fastio_context_create_allocation(ctx, 24, &a), FASTIO_OK);
    size_t dims[2] = {2, 3};
    EXPECT(fastio_allocation_set_type_and_dimensions(a, "float32", dims, 2), FASTIO_OK);
    EXPECT(fastio_allocation_set_type_and_dimensions(a, "float64", dims, 2), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_set_type_and_dimensions(a, "no such type", dims, 2), FASTIO_ERR_INVALID_ARGUMENT);
    char msg[256];
    TRUE(fastio_last_error_message(msg, sizeof msg) > 0);
    TRUE(strstr(msg, "no such type") != NULL);

    void *w = NULL;
    size_t n = 0;
    /* A failed call leaves the handle as it was: not mapped. */
    EXPECT(fastio_allocation_map_mut(a, NULL, &n), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_map_mut(a, &w, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_map(a, NULL, &n), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_map(a, (const void **)&w, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_unmap(a, w), FASTIO_ERR_NOT_MAPPED);
    EXPECT(fastio_context_create_allocation(ctx, 24, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_context_create_allocation(NULL, 24, &a), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_set_type_and_dimensions(a, "float32", NULL, 2), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_set_type_and_dimensions(a, NULL, dims, 2), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_set_type_and_dimensions(NULL, "float32", dims, 2), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_map_mut(a, &w, &n), FASTIO_OK);
    TRUE(n == 24);
    float *f = (float *)w;
    for (int i = 0; i < 6; i++) f[i] = (float)i * 1.5f;
    EXPECT(fastio_allocation_map_mut(a, &w, &n), FASTIO_ERR_CONFLICT);
    EXPECT(fastio_allocation_unmap(a, (const char *)w + 1), FASTIO_ERR_NOT_MAPPED);
    EXPECT(fastio_allocation_unmap(a, w), FASTIO_OK);
    EXPECT(fastio_allocation_unmap(a, w), FASTIO_ERR_NOT_MAPPED);
    EXPECT(fastio_allocation_publish(a, "x"), FASTIO_OK);
    EXPECT(fastio_allocation_publish(a, "x"), FASTIO_ERR_OTHER);

    fastio_allocation *b = NULL;
    EXPECT(fastio_context_get(ctx, "nope", &b), FASTIO_ERR_NOT_FOUND);
    EXPECT(fastio_context_get(ctx, NULL, &b), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_context_wait_for(ctx, "nope", 10, &b), FASTIO_ERR_TIMEOUT);
    EXPECT(fastio_context_get(ctx, "x", &b), FASTIO_OK);
    uint64_t size = 0;
    EXPECT(fastio_allocation_size(b, &size), FASTIO_OK);
    TRUE(size == 24);
    const size_t *bd = NULL;
    size_t nd = 0;
    EXPECT(fastio_allocation_size(b, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_dimensions(b, NULL, &nd), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_dimensions(b, &bd, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_context_get(ctx, "x", NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_context_wait_for(ctx, "x", 10, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_publish(b, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_publish(NULL, "y"), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_allocation_dimensions(b, &bd, &nd), FASTIO_OK);
    TRUE(nd == 2 && bd[0] == 2 && bd[1] == 3);
    char ty[32];
    EXPECT(fastio_allocation_element_type(b, ty, sizeof ty, &len), FASTIO_OK);
    TRUE(strcmp(ty, "float32") == 0);

    const void *r = NULL;
    EXPECT(fastio_allocation_map(b, &r, &n), FASTIO_OK);
    TRUE(((const float *)r)[5] == 7.5f);
    /* A reader excludes writers, in this handle and in others. */
    EXPECT(fastio_allocation_map_mut(a, &w, &n), FASTIO_ERR_CONFLICT);
    EXPECT(fastio_allocation_unmap(b, r), FASTIO_OK);

    EXPECT(fastio_allocation_free(b), FASTIO_OK);
    EXPECT(fastio_context_get(ctx, "x", &b), FASTIO_ERR_NOT_FOUND);
    EXPECT(fastio_allocation_free(NULL), FASTIO_ERR_INVALID_ARGUMENT);
    fastio_allocation_release(a);
    fastio_allocation_release(NULL);

    for (int code = 0; code <= 16; code++) TRUE(fastio_status_string(code) != NULL);
    TRUE(strcmp(fastio_status_string(FASTIO_OK), "ok") == 0);
    EXPECT(fastio_context_handle(ctx, handle, sizeof handle, &len), FASTIO_OK);
    TRUE(fastio_last_error_message(NULL, 0) == 0); /* the last call succeeded */

    fastio_context_release(ctx);
    fastio_context_release(NULL);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("contexts: ok\n");
    return 0;
}
