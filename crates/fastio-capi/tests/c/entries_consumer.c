/* A Clara-style C consumer of every entry kind (see entries_producer.c):
 * each input's shape, element type, size, allocation and pre-allocation
 * must be those the producer published, and the bytes the mapping gives
 * must be exactly `__size_bytes` and what the producer wrote. Every entry
 * function is first called with each pointer argument null. */
#include "clara_fastio.h"
#include "check.h"

static void nulls(nvidia_clara_fastio_entry *e) {
    int i = 0;
    size_t z = 0;
    int *ip = NULL;
    void *mem = NULL;
    EXPECT(nvidia_clara_fastio_entry__shape(e, NULL, &z), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__shape(e, &ip, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__size_bytes(e, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__is_allocated(e, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__is_preallocated(e, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__element_type(e, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    /* The case: a null size (or address) output must not leave
     * the entry mapped. */
    EXPECT(nvidia_clara_fastio_entry__map_allocation(e, &mem, NULL), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__map_allocation(e, NULL, &i), FASTIO_ERR_INVALID_ARGUMENT);
    EXPECT(nvidia_clara_fastio_entry__unmap_allocation(e, mem), FASTIO_ERR_NOT_MAPPED);
}

static void check(const char *name, int ndim, const int *shape, int et_want, int bytes,
                  int pre_want, unsigned seed, const char *text) {
    fastio_operator *op = NULL;
    EXPECT(fastio_operator_from_env(&op), FASTIO_OK);
    if (!op) return;
    nvidia_clara_fastio_entry *e = NULL;
    EXPECT(fastio_operator_input(op, name, &e), FASTIO_OK);
    if (!e) {
        fastio_operator_release(op);
        return;
    }
    nulls(e);
    int *got = NULL;
    size_t n = 0;
    EXPECT(nvidia_clara_fastio_entry__shape(e, &got, &n), FASTIO_OK);
    TRUE(n == (size_t)ndim);
    for (int i = 0; got && i < ndim && (size_t)i < n; i++) {
        if (got[i] != shape[i]) {
            fprintf(stderr, "%s: dimension %d is %d, published %d\n", name, i, got[i], shape[i]);
            failures++;
        }
    }
    nvidia_clara_element_type et = 0;
    EXPECT(nvidia_clara_fastio_entry__element_type(e, &et), FASTIO_OK);
    TRUE(et == et_want);
    size_t size = 0;
    EXPECT(nvidia_clara_fastio_entry__size_bytes(e, &size), FASTIO_OK);
    if (size != (size_t)bytes) {
        fprintf(stderr, "%s: size_bytes %zu, published %d\n", name, size, bytes);
        failures++;
    }
    int allocated = 0, pre = -1;
    EXPECT(nvidia_clara_fastio_entry__is_allocated(e, &allocated), FASTIO_OK);
    TRUE(allocated == 1);
    EXPECT(nvidia_clara_fastio_entry__is_preallocated(e, &pre), FASTIO_OK);
    if (pre != pre_want) {
        fprintf(stderr, "%s: is_preallocated %d, expected %d\n", name, pre, pre_want);
        failures++;
    }
    const unsigned char *mem = NULL;
    int mapped = 0;
    EXPECT(nvidia_clara_fastio_entry__map_allocation(e, (void **)&mem, &mapped), FASTIO_OK);
    TRUE(mapped == bytes && (size_t)mapped == size);
    for (int i = 0; mem && i < mapped; i++) {
        unsigned char want = text ? (unsigned char)text[i] : (unsigned char)(seed + (unsigned)i * 7u);
        if (mem[i] != want) {
            fprintf(stderr, "%s: byte %d is %u, not %u\n", name, i, mem[i], want);
            failures++;
            break;
        }
    }
    EXPECT(nvidia_clara_fastio_entry__unmap_allocation(e, (void *)mem), FASTIO_OK);
    fastio_operator_release(op);
}

int main(void) {
    const int s[2] = {2, 3}, d[2] = {3, 5}, t[1] = {14}, k[1] = {1};
    check("s", 2, s, NVIDIA_CLARA_ELEMENT_TYPE_FLOAT32, 24, 1, 1, NULL);
    check("d", 2, d, NVIDIA_CLARA_ELEMENT_TYPE_INT32, 60, 0, 2, NULL);
    check("t", 1, t, NVIDIA_CLARA_ELEMENT_TYPE_UINT8, 14, 0, 0, "hello, entries");
    check("k", 1, k, NVIDIA_CLARA_ELEMENT_TYPE_FLOAT64, 8, 1, 3, NULL);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("every input as published\n");
    return 0;
}
