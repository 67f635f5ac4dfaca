/* A Clara-style C operator: fills its dynamic float32 output `v`
 * [2, -1] as [2, 3] with i * 0.5, using only seed 001's entry functions. */
#include "clara_fastio.h"
#include "check.h"

int main(void) {
    fastio_operator *op = NULL;
    EXPECT(fastio_operator_from_env(&op), FASTIO_OK);
    if (!op) return 2;
    nvidia_clara_fastio_entry *v = NULL;
    EXPECT(fastio_operator_output(op, "v", &v), FASTIO_OK);
    EXPECT(fastio_operator_output(op, "nope", &v), FASTIO_ERR_NOT_FOUND);
    EXPECT(fastio_operator_output(op, "v", &v), FASTIO_OK);

    char name[64];
    size_t len = 0;
    EXPECT(nvidia_clara_fastio_entry__name(v, name, sizeof name, &len), FASTIO_OK);
    TRUE(strcmp(name, "c-producer/v") == 0 && len == 12);
    EXPECT(nvidia_clara_fastio_entry__name(v, name, 4, &len), FASTIO_ERR_BUFFER_TOO_SMALL);

    int access = 0, dynamic = 0, allocated = 1;
    EXPECT(nvidia_clara_fastio_entry__access(v, &access), FASTIO_OK);
    TRUE(access == NVIDIA_CLARA_IO_ACCESS_READ_WRITE);
    EXPECT(nvidia_clara_fastio_entry__is_dynamic(v, &dynamic), FASTIO_OK);
    TRUE(dynamic == 1);
    EXPECT(nvidia_clara_fastio_entry__is_allocated(v, &allocated), FASTIO_OK);
    TRUE(allocated == 0);
    nvidia_clara_element_type et = 0;
    EXPECT(nvidia_clara_fastio_entry__element_type(v, &et), FASTIO_OK);
    TRUE(et == NVIDIA_CLARA_ELEMENT_TYPE_FLOAT32);

    int *dyn = NULL, ndyn = 0;
    EXPECT(nvidia_clara_fastio_entry__dynamic_indices(v, &dyn, &ndyn), FASTIO_OK);
    TRUE(ndyn == 1 && dyn[0] == 1);
    EXPECT(nvidia_clara_fastio_entry__allocate(v), FASTIO_ERR_SHAPE);

    /* Index 0 is not dynamic: ignored, as in Clara. */
    int dims[2] = {0, 1}, values[2] = {7, 3}, n = 2;
    EXPECT(nvidia_clara_fastio_entry__update_shape(v, dims, values, &n), FASTIO_OK);
    int neg = -1;
    EXPECT(nvidia_clara_fastio_entry__update_shape(v, dims, values, &neg), FASTIO_ERR_INVALID_ARGUMENT);
    int *shape = NULL;
    size_t nshape = 0;
    EXPECT(nvidia_clara_fastio_entry__shape(v, &shape, &nshape), FASTIO_OK);
    TRUE(nshape == 2 && shape[0] == 2 && shape[1] == 3);
    size_t bytes = 0;
    EXPECT(nvidia_clara_fastio_entry__size_bytes(v, &bytes), FASTIO_OK);
    TRUE(bytes == 24);

    EXPECT(nvidia_clara_fastio_entry__allocate(v), FASTIO_OK);
    void *mem = NULL;
    int size = 0;
    EXPECT(nvidia_clara_fastio_entry__map_allocation(v, &mem, &size), FASTIO_OK);
    TRUE(size == 24);
    EXPECT(nvidia_clara_fastio_entry__map_allocation(v, &mem, &size), FASTIO_ERR_CONFLICT);
    EXPECT(nvidia_clara_fastio_entry__allocate(v), FASTIO_ERR_CONFLICT);
    for (int i = 0; i < 6; i++) ((float *)mem)[i] = (float)i * 0.5f;
    EXPECT(nvidia_clara_fastio_entry__unmap_allocation(v, NULL), FASTIO_ERR_NOT_MAPPED);
    EXPECT(nvidia_clara_fastio_entry__unmap_allocation(v, mem), FASTIO_OK);
    EXPECT(nvidia_clara_fastio_entry__is_allocated(v, &allocated), FASTIO_OK);
    TRUE(allocated == 1);
    EXPECT(nvidia_clara_fastio_entry__access(NULL, &access), FASTIO_ERR_INVALID_ARGUMENT);

    fastio_operator_release(op);
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    printf("produced\n");
    return 0;
}
