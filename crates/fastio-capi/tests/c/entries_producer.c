/* A Clara-style C producer of every entry kind: a static float32 [2, 3]
 * (pre-allocated by the driver), a dynamic int32 [3, -1] given [3, 5], a
 * string and a float64 scalar. Before using each output it calls every
 * entry function once with each pointer argument null, and then uses the
 * entry normally: a failed call must leave the entry as it was. */
#include "clara_fastio.h"
#include "check.h"

/* Every pointer argument of every entry function, null once each. */
static void nulls(nvidia_clara_fastio_entry *e) {
    int i = 0, dims[1] = {0}, values[1] = {1}, n = 1;
    size_t z = 0;
    int *ip = NULL;
    void *mem = NULL;
    char buf[64];
    nvidia_clara_element_type et = 0;
    EXPECT(nvidia_clara_fastio_entry__name(NULL, buf, sizeof buf, &z), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__shape(NULL, &ip, &z), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__shape(e, NULL, &z), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__shape(e, &ip, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__element_type(NULL, &et), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__element_type(e, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__size_bytes(NULL, &z), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__size_bytes(e, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__dynamic_indices(NULL, &ip, &i), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__dynamic_indices(e, NULL, &i), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__dynamic_indices(e, &ip, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__is_dynamic(NULL, &i), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__is_dynamic(e, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__update_shape(NULL, dims, values, &n), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__update_shape(e, NULL, values, &n), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__update_shape(e, dims, NULL, &n), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__update_shape(e, dims, values, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__access(NULL, &i), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__access(e, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__allocate(NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__is_allocated(NULL, &i), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__is_allocated(e, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__is_preallocated(NULL, &i), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__is_preallocated(e, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__map_allocation(NULL, &mem, &i), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__map_allocation(e, NULL, &i), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__map_allocation(e, &mem, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__unmap_allocation(NULL, mem), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__unmap_allocation(e, NULL), FASTIO_ERR_NOT_MAPPED);
}

/* Allocates (unless pre-allocated), maps, fills byte i with f(i), unmaps. */
static void fill(nvidia_clara_fastio_entry *e, int expect_bytes, unsigned seed) {
    int allocated = 0;
    EXPECT(nvidia_clara_fastio_entry__is_allocated(e, &allocated), FASTIO_OK);
    if (!allocated) EXPECT(nvidia_clara_fastio_entry__allocate(e), FASTIO_OK);
    unsigned char *mem = NULL;
    int size = 0;
    EXPECT(nvidia_clara_fastio_entry__map_allocation(e, (void **)&mem, &size), FASTIO_OK);
    TRUE(size == expect_bytes);
    size_t est = 0;
    EXPECT(nvidia_clara_fastio_entry__size_bytes(e, &est), FASTIO_OK);
    TRUE(est == (size_t)size);
    for (int i = 0; mem && i < size; i++) mem[i] = (unsigned char)(seed + (unsigned)i * 7u);
    EXPECT(nvidia_clara_fastio_entry__unmap_allocation(e, mem), FASTIO_OK);
}

int main(void) {
    fastio_operator *op = NULL;
    EXPECT(fastio_operator_from_env(NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_operator_from_env(&op), FASTIO_OK);
    if (!op) return 2;
    nvidia_clara_fastio_entry *s = NULL, *d = NULL, *t = NULL, *k = NULL;
    EXPECT(fastio_operator_output(NULL, "s", &s), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_operator_output(op, NULL, &s), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_operator_output(op, "s", NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(fastio_operator_output(op, "s", &s), FASTIO_OK);
    EXPECT(fastio_operator_output(op, "d", &d), FASTIO_OK);
    EXPECT(fastio_operator_output(op, "t", &t), FASTIO_OK);
    EXPECT(fastio_operator_output(op, "k", &k), FASTIO_OK);
    char name[8];
    EXPECT(fastio_operator_name(op, name, sizeof name, NULL), FASTIO_OK);
    EXPECT(fastio_operator_name(NULL, name, sizeof name, NULL), FASTIO_ERR_INVALID_ARGUMENT);

    nvidia_clara_fastio_entry *all[4] = {s, d, t, k};
    for (int i = 0; i < 4; i++) nulls(all[i]);

    int pre = -1;
    EXPECT(nvidia_clara_fastio_entry__is_preallocated(s, &pre), FASTIO_OK);
    TRUE(pre == 1);
    EXPECT(nvidia_clara_fastio_entry__is_preallocated(k, &pre), FASTIO_OK);
    TRUE(pre == 1);
    EXPECT(nvidia_clara_fastio_entry__is_preallocated(d, &pre), FASTIO_OK);
    TRUE(pre == 0);

    fill(s, 24, 1);
    int one = 1, idx = 1, five = 5;
    EXPECT(nvidia_clara_fastio_entry__update_shape(d, &idx, &five, &one), FASTIO_OK);
    fill(d, 60, 2);
    const char *text = "hello, entries";
    int zero = 0, len = (int)strlen(text);
    EXPECT(nvidia_clara_fastio_entry__update_shape(t, &zero, &len, &one), FASTIO_OK);
    EXPECT(nvidia_clara_fastio_entry__allocate(t), FASTIO_OK);
    char *mem = NULL;
    int size = 0;
    EXPECT(nvidia_clara_fastio_entry__map_allocation(t, (void **)&mem, &size), FASTIO_OK);
    TRUE(size == len);
    if (mem && size == len) memcpy(mem, text, (size_t)len);
    EXPECT(nvidia_clara_fastio_entry__unmap_allocation(t, mem), FASTIO_OK);
    fill(k, 8, 3);

    fastio_operator_release(op);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("produced every kind\n");
    return 0;
}
