/* fastio.hpp: the C++17 API of fastio, header-only, over the C API of
 * `fastio.h` and `clara_fastio.h` (no second implementation: every call
 * goes to a C function, and every status the C function returns that is
 * not FASTIO_OK is thrown).
 *
 *   - One RAII owner per C handle: context, allocation, mapping, op
 *     (the operator a process runs as), frame, stream_producer,
 *     stream_consumer, stream_frame. Owners are move-only; a moved-from
 *     owner holds a null handle, and any call on it throws
 *     fastio::error (FASTIO_ERR_INVALID_ARGUMENT, from the C function),
 *     `mapping::unmap()` too; only `operator bool` (false), `c_handle()`
 *     (null) and a moved-from mapping's view (empty: null `data()`,
 *     `size()` 0, no dimensions) answer without throwing.
 *     `entry` is a reference into its `op` (copyable, valid while the op
 *     lives).
 *   - Errors are exceptions: fastio::error (a std::runtime_error) with
 *     the status (`status()`, a FASTIO_ERR_* code) and `what()`, the
 *     status's text (`fastio_status_string`, e.g. "invalid argument"),
 *     ": " and the C API's message; fastio::no_space (/dev/shm or
 *     the context is full), fastio::poisoned (a stream's producer failed)
 *     and fastio::timeout derive from it.
 *   - Typed views: view<const T> of an input, view<T> of an output, with
 *     the shape. The element type is checked against T (an int32 entry
 *     asked for float throws); `bytes()` gives untyped bytes.
 *
 * A view or mapping must not outlive the owner it came from (the memory
 * is unmapped or released with it), as with any C++ container's
 * iterators.
 */
#ifndef FASTIO_HPP
#define FASTIO_HPP

#include <chrono>
#include <complex>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "clara_fastio.h"

namespace fastio {

/* ---------------------------------------------------------------- errors */

/// A failed call: `status()` is the C status (a FASTIO_ERR_* code);
/// `what()` is the status's text (`fastio_status_string(status)`, such as
/// "invalid argument", not the constant's name), ": " and the message.
class error : public std::runtime_error {
public:
    error(int status, const std::string &message)
        : std::runtime_error(std::string(fastio_status_string(status)) + ": " + message),
          status_(status) {}
    /// The C API's status code.
    int status() const noexcept { return status_; }

private:
    int status_;
};

/// `/dev/shm` or the context has no room for the allocation
/// (FASTIO_ERR_NO_SPACE).
class no_space : public error {
public:
    using error::error;
};

/// A stream's producer failed: no frame follows (FASTIO_ERR_POISONED).
class poisoned : public error {
public:
    using error::error;
};

/// A wait ran out of time (FASTIO_ERR_TIMEOUT).
class timeout : public error {
public:
    using error::error;
};

namespace detail {

/// The calling thread's last C error message.
inline std::string last_message() {
    std::size_t n = fastio_last_error_message(nullptr, 0);
    std::string s(n + 1, '\0');
    n = fastio_last_error_message(&s[0], s.size());
    s.resize(n < s.size() ? n : s.size() - 1);
    return s;
}

/// Throws the exception of `status` with the last message.
[[noreturn]] inline void raise(int status, std::string message) {
    switch (status) {
    case FASTIO_ERR_NO_SPACE:
        throw no_space(status, message);
    case FASTIO_ERR_POISONED:
        throw poisoned(status, message);
    case FASTIO_ERR_TIMEOUT:
        throw timeout(status, message);
    default:
        throw error(status, message);
    }
}

/// Throws unless `status` is FASTIO_OK.
inline void check(int status) {
    if (status != FASTIO_OK) raise(status, last_message());
}

/// Text from a C call of the shape f(buffer, size, &len): asks for the
/// length first, then copies.
template <class F>
std::string text(F f) {
    std::size_t len = 0;
    int rc = f(nullptr, 0, &len);
    if (rc != FASTIO_ERR_BUFFER_TOO_SMALL) check(rc);
    std::string s(len + 1, '\0');
    check(f(&s[0], s.size(), &len));
    s.resize(len);
    return s;
}

inline std::int64_t millis(std::chrono::milliseconds t) {
    return static_cast<std::int64_t>(t.count());
}

} // namespace detail

/// Wait without a time limit (the default of every wait).
inline constexpr std::chrono::milliseconds forever{-1};

/* --------------------------------------------------------- element types */

/// IEEE half precision, as stored (fastio does no arithmetic on it).
struct float16 {
    std::uint16_t bits;
};

/// bfloat16, as stored.
struct bfloat16 {
    std::uint16_t bits;
};

/// The datashape name of the element type T (`element<float>::name` is
/// "float32"); undefined for a type fastio has no name for.
template <class T>
struct element;

#define FASTIO_ELEMENT_(T, NAME)                                                          \
    template <>                                                                           \
    struct element<T> {                                                                   \
        static constexpr const char *name = NAME;                                         \
    }
FASTIO_ELEMENT_(bool, "bool");
FASTIO_ELEMENT_(std::int8_t, "int8");
FASTIO_ELEMENT_(std::int16_t, "int16");
FASTIO_ELEMENT_(std::int32_t, "int32");
FASTIO_ELEMENT_(std::int64_t, "int64");
FASTIO_ELEMENT_(std::uint8_t, "uint8");
FASTIO_ELEMENT_(std::uint16_t, "uint16");
FASTIO_ELEMENT_(std::uint32_t, "uint32");
FASTIO_ELEMENT_(std::uint64_t, "uint64");
FASTIO_ELEMENT_(float16, "float16");
FASTIO_ELEMENT_(bfloat16, "bfloat16");
FASTIO_ELEMENT_(float, "float32");
FASTIO_ELEMENT_(double, "float64");
FASTIO_ELEMENT_(std::complex<float>, "complex64");
FASTIO_ELEMENT_(std::complex<double>, "complex128");
#undef FASTIO_ELEMENT_

/* ----------------------------------------------------------------- views */

/// Elements of type T over memory fastio lends (no ownership), with a
/// shape (row-major, C order). `view<const T>` for an input.
template <class T>
class view {
public:
    view() = default;
    view(T *data, std::size_t size, std::vector<std::size_t> shape)
        : data_(data), size_(size), shape_(std::move(shape)) {}

    T *data() const noexcept { return data_; }
    /// Elements (not bytes).
    std::size_t size() const noexcept { return size_; }
    std::size_t size_bytes() const noexcept { return size_ * sizeof(T); }
    bool empty() const noexcept { return size_ == 0; }
    const std::vector<std::size_t> &shape() const noexcept { return shape_; }
    std::size_t ndim() const noexcept { return shape_.size(); }
    T *begin() const noexcept { return data_; }
    T *end() const noexcept { return data_ + size_; }
    T &operator[](std::size_t i) const noexcept { return data_[i]; }
    /// The element at one index per dimension, checked: std::out_of_range
    /// for a wrong count or an index past its dimension.
    T &at(std::initializer_list<std::size_t> index) const {
        if (index.size() != shape_.size())
            throw std::out_of_range("fastio::view::at: " + std::to_string(index.size()) +
                                    " indices for " + std::to_string(shape_.size()) +
                                    " dimensions");
        std::size_t flat = 0, k = 0;
        for (std::size_t i : index) {
            if (i >= shape_[k])
                throw std::out_of_range("fastio::view::at: index " + std::to_string(i) +
                                        " past dimension " + std::to_string(k) + " of size " +
                                        std::to_string(shape_[k]));
            flat = flat * shape_[k] + i;
            ++k;
        }
        return data_[flat];
    }

private:
    T *data_ = nullptr;
    std::size_t size_ = 0;
    std::vector<std::size_t> shape_;
};

namespace detail {

/// A view of `bytes` bytes at `data` as T, after checking that the
/// memory holds `held` elements (else fastio::error naming `what`).
template <class T, class V>
view<T> typed(V *data, std::size_t bytes, std::vector<std::size_t> shape,
              const std::string &held, const std::string &what) {
    using E = std::remove_const_t<T>;
    if (held != element<E>::name)
        throw error(FASTIO_ERR_INVALID_ARGUMENT,
                    what + " holds " + held + ", not " + element<E>::name);
    if (bytes % sizeof(E) != 0)
        throw error(FASTIO_ERR_SHAPE, what + ": " + std::to_string(bytes) +
                                          " bytes are not a whole number of " +
                                          element<E>::name);
    return view<T>(static_cast<T *>(data), bytes / sizeof(E), std::move(shape));
}

template <class I>
std::vector<std::size_t> sizes(const I *p, std::size_t n) {
    std::vector<std::size_t> v;
    v.reserve(n);
    for (std::size_t i = 0; i < n; ++i) v.push_back(static_cast<std::size_t>(p[i] < 0 ? 0 : p[i]));
    return v;
}

} // namespace detail

/// A view that unmaps its memory when destroyed (from `allocation::map`
/// and `entry::map`). Move-only.
template <class T>
class mapping : public view<T> {
public:
    using unmap_fn = int (*)(void *handle, void *data);

    mapping(view<T> v, void *handle, unmap_fn unmap)
        : view<T>(std::move(v)), handle_(handle), unmap_(unmap) {}
    /// Leaves `o` empty: a null handle and an empty view.
    mapping(mapping &&o) noexcept
        : view<T>(std::exchange(static_cast<view<T> &>(o), view<T>())),
          handle_(std::exchange(o.handle_, nullptr)),
          unmap_(o.unmap_) {}
    mapping &operator=(mapping &&o) noexcept {
        if (this != &o) {
            reset();
            view<T>::operator=(std::exchange(static_cast<view<T> &>(o), view<T>()));
            handle_ = std::exchange(o.handle_, nullptr);
            unmap_ = o.unmap_;
        }
        return *this;
    }
    mapping(const mapping &) = delete;
    mapping &operator=(const mapping &) = delete;
    ~mapping() { reset(); }

    /// Unmaps now (the destructor does it otherwise, ignoring errors);
    /// the view is empty afterwards. On a moved-from or already unmapped
    /// mapping it throws fastio::error (FASTIO_ERR_INVALID_ARGUMENT: the C
    /// function's null check), as any call on a moved-from owner does.
    void unmap() {
        void *h = std::exchange(handle_, nullptr);
        int rc = unmap_(h, const_cast<void *>(static_cast<const void *>(this->data())));
        view<T>::operator=(view<T>());
        detail::check(rc);
    }

private:
    void reset() noexcept {
        void *h = std::exchange(handle_, nullptr);
        if (h) unmap_(h, const_cast<void *>(static_cast<const void *>(this->data())));
    }
    void *handle_ = nullptr;
    unmap_fn unmap_ = nullptr;
};

/* ------------------------------------------------- contexts, allocations */

/// Shared memory of a context, by handle (`fastio_allocation`).
class allocation {
public:
    explicit allocation(fastio_allocation *h) noexcept : h_(h) {}
    allocation(allocation &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    allocation &operator=(allocation &&o) noexcept {
        if (this != &o) {
            fastio_allocation_release(h_);
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    allocation(const allocation &) = delete;
    allocation &operator=(const allocation &) = delete;
    ~allocation() { fastio_allocation_release(h_); }

    /// Publishes it under `name` with its current type and dimensions.
    void publish(const std::string &name) { detail::check(fastio_allocation_publish(h_, name.c_str())); }
    /// Describes the memory as `dims` of `element_type` (datashape text);
    /// the byte size must match exactly.
    void set_type_and_dimensions(const std::string &element_type, const std::vector<std::size_t> &dims) {
        detail::check(fastio_allocation_set_type_and_dimensions(h_, element_type.c_str(), dims.data(), dims.size()));
    }
    /// As `set_type_and_dimensions(element<T>::name, dims)`.
    template <class T>
    void set_type(const std::vector<std::size_t> &dims) {
        set_type_and_dimensions(element<T>::name, dims);
    }
    std::uint64_t size() const {
        std::uint64_t n = 0;
        detail::check(fastio_allocation_size(h_, &n));
        return n;
    }
    std::vector<std::size_t> dimensions() const {
        const std::size_t *d = nullptr;
        std::size_t n = 0;
        detail::check(fastio_allocation_dimensions(h_, &d, &n));
        return std::vector<std::size_t>(d, d + n);
    }
    /// Datashape text (`float32`, `3 * int16`, ...).
    std::string element_type() const {
        return detail::text([&](char *b, std::size_t n, std::size_t *len) {
            return fastio_allocation_element_type(h_, b, n, len);
        });
    }
    /// Maps it read-only (a write faults) as elements of T.
    template <class T>
    mapping<const T> map() const {
        auto held = element_type();
        auto dims = dimensions();
        const void *p = nullptr;
        std::size_t n = 0;
        detail::check(fastio_allocation_map(h_, &p, &n));
        return make<const T>(const_cast<void *>(p), n, held, std::move(dims));
    }
    /// Maps it writable, exclusively across processes, as elements of T.
    template <class T>
    mapping<T> map_mut() {
        auto held = element_type();
        auto dims = dimensions();
        void *p = nullptr;
        std::size_t n = 0;
        detail::check(fastio_allocation_map_mut(h_, &p, &n));
        return make<T>(p, n, held, std::move(dims));
    }
    /// Marks the memory for deletion and gives up this handle (also when
    /// it throws).
    void free() { detail::check(fastio_allocation_free(std::exchange(h_, nullptr))); }

    fastio_allocation *c_handle() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }

private:
    static int unmap(void *h, void *data) { return fastio_allocation_unmap(static_cast<fastio_allocation *>(h), data); }
    template <class T>
    mapping<T> make(void *p, std::size_t n, const std::string &held, std::vector<std::size_t> dims) const {
        try {
            return mapping<T>(detail::typed<T>(p, n, std::move(dims), held, "allocation"), h_, &unmap);
        } catch (...) {
            fastio_allocation_unmap(h_, p);
            throw;
        }
    }
    fastio_allocation *h_;
};

/// A context: the shared memory allocations live in (`fastio_context`).
class context {
public:
    explicit context(fastio_context *h) noexcept : h_(h) {}
    /// A new context of `capacity` bytes.
    static context create(std::uint64_t capacity) {
        fastio_context *h = nullptr;
        detail::check(fastio_context_create(capacity, &h));
        return context(h);
    }
    /// The context whose handle is given (a name, or `fd:<n>`).
    static context attach(const std::string &handle) {
        fastio_context *h = nullptr;
        detail::check(fastio_context_attach(handle.c_str(), &h));
        return context(h);
    }
    /// The context named by `FASTIO_CONTEXT`.
    static context from_env() {
        fastio_context *h = nullptr;
        detail::check(fastio_context_from_env(&h));
        return context(h);
    }
    context(context &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    context &operator=(context &&o) noexcept {
        if (this != &o) {
            fastio_context_release(h_);
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    context(const context &) = delete;
    context &operator=(const context &) = delete;
    ~context() { fastio_context_release(h_); }

    /// The handle other processes attach with.
    std::string handle() const {
        return detail::text([&](char *b, std::size_t n, std::size_t *len) {
            return fastio_context_handle(h_, b, n, len);
        });
    }
    /// A new allocation of `size` bytes (uint8, [size]) until published.
    allocation create_allocation(std::uint64_t size) {
        fastio_allocation *a = nullptr;
        detail::check(fastio_context_create_allocation(h_, size, &a));
        return allocation(a);
    }
    /// The allocation published as `name`.
    allocation get(const std::string &name) {
        fastio_allocation *a = nullptr;
        detail::check(fastio_context_get(h_, name.c_str(), &a));
        return allocation(a);
    }
    /// Waits up to `limit` for `name` to be published, then gets it.
    allocation wait_for(const std::string &name, std::chrono::milliseconds limit) {
        fastio_allocation *a = nullptr;
        auto ms = limit.count() < 0 ? UINT64_MAX : static_cast<std::uint64_t>(limit.count());
        detail::check(fastio_context_wait_for(h_, name.c_str(), ms, &a));
        return allocation(a);
    }

    fastio_context *c_handle() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }

private:
    fastio_context *h_;
};

/* -------------------------------------------------------------- operators */

/// An input or output of the running operator: a reference into its
/// `op`, valid while that lives (`nvidia_clara_fastio_entry`).
class entry {
public:
    explicit entry(nvidia_clara_fastio_entry *h) noexcept : h_(h) {}

    /// `<operator>/<output>`.
    std::string name() const {
        return detail::text([&](char *b, std::size_t n, std::size_t *len) {
            return nvidia_clara_fastio_entry__name(h_, b, static_cast<int>(n), len);
        });
    }
    /// The current shape (0 in a dynamic dimension not set yet).
    std::vector<std::size_t> shape() const {
        int *s = nullptr;
        std::size_t n = 0;
        detail::check(nvidia_clara_fastio_entry__shape(h_, &s, &n));
        return detail::sizes(s, n);
    }
    /// The element type as datashape text (`float32`).
    std::string element_type() const {
        return detail::text([&](char *b, std::size_t n, std::size_t *len) {
            return fastio_entry_element_type(h_, b, n, len);
        });
    }
    /// Bytes the current shape needs (0 while it is not well defined).
    std::size_t size_bytes() const {
        std::size_t n = 0;
        detail::check(nvidia_clara_fastio_entry__size_bytes(h_, &n));
        return n;
    }
    bool is_dynamic() const {
        int d = 0;
        detail::check(nvidia_clara_fastio_entry__is_dynamic(h_, &d));
        return d != 0;
    }
    /// The indices of the dynamic dimensions.
    std::vector<int> dynamic_indices() const {
        int *p = nullptr;
        int n = 0;
        detail::check(nvidia_clara_fastio_entry__dynamic_indices(h_, &p, &n));
        return std::vector<int>(p, p + (n < 0 ? 0 : n));
    }
    /// True for an input (read-only), false for an output.
    bool is_input() const {
        int access = 0;
        detail::check(nvidia_clara_fastio_entry__access(h_, &access));
        return access == NVIDIA_CLARA_IO_ACCESS_READ_ONLY;
    }
    /// Sets dynamic dimensions: {dimension, size} pairs. Outputs only.
    void update_shape(const std::vector<std::pair<int, int>> &sizes) {
        std::vector<int> dims, values;
        for (auto &p : sizes) {
            dims.push_back(p.first);
            values.push_back(p.second);
        }
        int n = static_cast<int>(sizes.size());
        detail::check(nvidia_clara_fastio_entry__update_shape(h_, dims.data(), values.data(), &n));
    }
    /// Allocates the output for its current shape.
    void allocate() { detail::check(nvidia_clara_fastio_entry__allocate(h_)); }
    bool is_allocated() const {
        int a = 0;
        detail::check(nvidia_clara_fastio_entry__is_allocated(h_, &a));
        return a != 0;
    }
    /// Allocated by the driver before the operator started.
    bool is_preallocated() const {
        int a = 0;
        detail::check(nvidia_clara_fastio_entry__is_preallocated(h_, &a));
        return a != 0;
    }
    /// The memory as elements of T, read-only (an input's or an output's).
    template <class T>
    mapping<const T> map() const {
        return map_as<const T>();
    }
    /// An output's memory as elements of T, writable. An input's throws
    /// fastio::error with FASTIO_ERR_ACCESS: inputs are read-only.
    template <class T>
    mapping<T> map_mut() {
        if (is_input())
            throw error(FASTIO_ERR_ACCESS, "input " + name() + " is read-only: map it with map<T>()");
        return map_as<T>();
    }
    /// The memory as bytes, read-only, whatever the element type.
    mapping<const std::byte> bytes() const {
        void *p = nullptr;
        std::size_t n = 0;
        detail::check(nvidia_clara_fastio_entry__map_allocation64(h_, &p, &n));
        return mapping<const std::byte>(view<const std::byte>(static_cast<const std::byte *>(p), n, {n}), h_, &unmap);
    }

    nvidia_clara_fastio_entry *c_handle() const noexcept { return h_; }

private:
    static int unmap(void *h, void *data) {
        return nvidia_clara_fastio_entry__unmap_allocation(static_cast<nvidia_clara_fastio_entry *>(h), data);
    }
    template <class T>
    mapping<T> map_as() const {
        auto held = element_type();
        auto dims = shape();
        void *p = nullptr;
        std::size_t n = 0;
        detail::check(nvidia_clara_fastio_entry__map_allocation64(h_, &p, &n));
        try {
            return mapping<T>(detail::typed<T>(p, n, std::move(dims), held, "entry " + name()), h_, &unmap);
        } catch (...) {
            nvidia_clara_fastio_entry__unmap_allocation(h_, p);
            throw;
        }
    }
    nvidia_clara_fastio_entry *h_;
};

/// One frame of a streaming operator: every input's frame and a slot of
/// every output (`fastio_frame`). Done (its outputs published) by
/// `done()` or at the end of its loop iteration; a frame destroyed while
/// an exception unwinds is abandoned: its outputs are not published.
class frame {
public:
    explicit frame(fastio_frame *h) noexcept : h_(h), unwinding_(std::uncaught_exceptions()) {}
    frame(frame &&o) noexcept : h_(std::exchange(o.h_, nullptr)), unwinding_(o.unwinding_) {}
    frame &operator=(frame &&o) noexcept {
        if (this != &o) {
            finish();
            h_ = std::exchange(o.h_, nullptr);
            unwinding_ = o.unwinding_;
        }
        return *this;
    }
    frame(const frame &) = delete;
    frame &operator=(const frame &) = delete;
    ~frame() { finish(); }

    /// The source frame's number.
    std::uint64_t seq() const {
        std::uint64_t s = 0;
        detail::check(fastio_frame_seq(h_, &s, nullptr));
        return s;
    }
    /// When the source frame was taken (ns since the Unix epoch).
    std::uint64_t timestamp_ns() const {
        std::uint64_t t = 0;
        detail::check(fastio_frame_seq(h_, nullptr, &t));
        return t;
    }
    /// Input or output `name`'s element type (`float32`).
    std::string element_type(const std::string &name) const {
        return detail::text([&](char *b, std::size_t n, std::size_t *len) {
            return fastio_frame_element_type(h_, name.c_str(), b, n, len);
        });
    }
    /// Input `name`'s frame as elements of T, read-only, with its shape.
    template <class T>
    view<const T> input(const std::string &name) const {
        auto held = element_type(name);
        const void *p = nullptr;
        std::size_t n = 0, ndim = 0;
        const std::size_t *shape = nullptr;
        detail::check(fastio_frame_input(h_, name.c_str(), &p, &n, &shape, &ndim));
        return detail::typed<const T>(p, n, std::vector<std::size_t>(shape, shape + ndim), held, "input " + name);
    }
    /// Output `name`'s slot as elements of T, writable, as a frame of
    /// `shape` (empty: the largest). Waits for a free slot the first time.
    template <class T>
    view<T> output(const std::string &name, const std::vector<std::size_t> &shape = {}) {
        auto held = element_type(name);
        if (held != element<T>::name)
            throw error(FASTIO_ERR_INVALID_ARGUMENT, "output " + name + " holds " + held + ", not " + element<T>::name);
        void *p = nullptr;
        std::size_t n = 0;
        detail::check(fastio_frame_output(h_, name.c_str(), shape.empty() ? nullptr : shape.data(), shape.size(), &p, &n));
        return detail::typed<T>(p, n, shape, held, "output " + name);
    }
    /// Publishes the outputs and releases the inputs now.
    void done() { detail::check(fastio_frame_done(std::exchange(h_, nullptr))); }
    /// Releases the inputs without publishing the outputs.
    void abandon() { detail::check(fastio_frame_abandon(std::exchange(h_, nullptr))); }
    explicit operator bool() const noexcept { return h_ != nullptr; }

private:
    void finish() noexcept {
        if (!h_) return;
        if (std::uncaught_exceptions() > unwinding_)
            fastio_frame_abandon(std::exchange(h_, nullptr));
        else
            fastio_frame_done(std::exchange(h_, nullptr));
    }
    fastio_frame *h_;
    int unwinding_;
};

/// The operator this process runs as, from FASTIO_OPERATOR and
/// FASTIO_CONTEXT (`fastio_operator`).
class op {
public:
    explicit op(fastio_operator *h) noexcept : h_(h) {}
    static op from_env() {
        fastio_operator *h = nullptr;
        detail::check(fastio_operator_from_env(&h));
        return op(h);
    }
    op(op &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    op &operator=(op &&o) noexcept {
        if (this != &o) {
            fastio_operator_release(h_);
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    op(const op &) = delete;
    op &operator=(const op &) = delete;
    ~op() { fastio_operator_release(h_); }

    std::string name() const {
        return detail::text([&](char *b, std::size_t n, std::size_t *len) {
            return fastio_operator_name(h_, b, n, len);
        });
    }
    /// The input named `name` (local, or `<operator>/<output>`).
    entry input(const std::string &name) {
        nvidia_clara_fastio_entry *e = nullptr;
        detail::check(fastio_operator_input(h_, name.c_str(), &e));
        return entry(e);
    }
    /// The output named `name`.
    entry output(const std::string &name) {
        nvidia_clara_fastio_entry *e = nullptr;
        detail::check(fastio_operator_output(h_, name.c_str(), &e));
        return entry(e);
    }
    /// The next frame, or none after the last; throws fastio::poisoned
    /// when an input's producer failed. The previous frame must be done.
    std::optional<frame> next_frame() {
        fastio_frame *f = nullptr;
        int rc = fastio_operator_next_frame(h_, &f);
        if (rc == FASTIO_END_OF_STREAM) return std::nullopt;
        detail::check(rc);
        return std::optional<frame>(std::in_place, f);
    }

    /// `for (auto &frame : op.frames())`: each frame is done when its
    /// iteration ends.
    class frames_range {
    public:
        class iterator {
        public:
            explicit iterator(op *o) : op_(o) { advance(); }
            iterator() = default;
            frame &operator*() { return *current_; }
            iterator &operator++() {
                if (*current_) current_->done();
                current_.reset();
                advance();
                return *this;
            }
            bool operator!=(const iterator &o) const { return current_.has_value() != o.current_.has_value(); }

        private:
            void advance() {
                if (op_) current_ = op_->next_frame();
            }
            op *op_ = nullptr;
            std::optional<frame> current_;
        };
        explicit frames_range(op *o) : op_(o) {}
        iterator begin() { return iterator(op_); }
        iterator end() { return iterator(); }

    private:
        op *op_;
    };
    frames_range frames() { return frames_range(this); }

    fastio_operator *c_handle() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }

private:
    fastio_operator *h_;
};

/* ---------------------------------------------- streams without a pipeline */

/// What a full stream does (`FASTIO_OVERFLOW_*`).
enum class overflow : std::int32_t {
    /// The producer waits: nothing is lost.
    block = FASTIO_OVERFLOW_BLOCK,
    /// The oldest frame no consumer holds is overwritten.
    drop_oldest = FASTIO_OVERFLOW_DROP_OLDEST,
};

/// The producer of a stream (`fastio_stream_producer`). Destroying it
/// ends the stream (as closing a pipe does).
class stream_producer {
public:
    explicit stream_producer(fastio_stream_producer *h) noexcept : h_(h) {}
    /// Creates stream `name` of `element_type` frames of at most
    /// `max_shape`, `depth` in flight, for `consumers` consumers.
    static stream_producer create(context &ctx, const std::string &name, const std::string &element_type,
                                  const std::vector<std::size_t> &max_shape, std::size_t depth = 4,
                                  std::size_t consumers = 1, overflow when_full = overflow::block) {
        fastio_stream_producer *p = nullptr;
        detail::check(fastio_stream_create(ctx.c_handle(), name.c_str(), element_type.c_str(), max_shape.data(),
                                           max_shape.size(), depth, consumers,
                                           static_cast<std::int32_t>(when_full), &p));
        return stream_producer(p);
    }
    /// As `create(ctx, name, element<T>::name, ...)`.
    template <class T>
    static stream_producer create(context &ctx, const std::string &name, const std::vector<std::size_t> &max_shape,
                                  std::size_t depth = 4, std::size_t consumers = 1,
                                  overflow when_full = overflow::block) {
        return create(ctx, name, element<T>::name, max_shape, depth, consumers, when_full);
    }
    /// Takes over the producer of stream `name` (one whose producer is gone).
    static stream_producer attach(context &ctx, const std::string &name) {
        fastio_stream_producer *p = nullptr;
        detail::check(fastio_stream_producer_attach(ctx.c_handle(), name.c_str(), &p));
        return stream_producer(p);
    }
    stream_producer(stream_producer &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    stream_producer &operator=(stream_producer &&o) noexcept {
        if (this != &o) {
            fastio_stream_producer_free(h_);
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    stream_producer(const stream_producer &) = delete;
    stream_producer &operator=(const stream_producer &) = delete;
    ~stream_producer() { fastio_stream_producer_free(h_); }

    std::string element_type() const {
        return detail::text([&](char *b, std::size_t n, std::size_t *len) {
            return fastio_stream_producer_element_type(h_, b, n, len);
        });
    }
    /// Waits (up to `limit`) for a free slot: the next frame's memory as
    /// elements of T, for a frame of `shape`, writable until `publish`.
    template <class T>
    view<T> begin(const std::vector<std::size_t> &shape, std::chrono::milliseconds limit = forever) {
        auto held = element_type();
        if (held != element<T>::name)
            throw error(FASTIO_ERR_INVALID_ARGUMENT, "stream holds " + held + ", not " + element<T>::name);
        void *p = nullptr;
        std::size_t n = 0;
        detail::check(fastio_stream_begin(h_, shape.data(), shape.size(), detail::millis(limit), &p, &n));
        return detail::typed<T>(p, n, shape, held, "stream frame");
    }
    /// Publishes the begun frame; gives its number.
    std::uint64_t publish() {
        std::uint64_t seq = 0;
        detail::check(fastio_stream_publish(h_, &seq));
        return seq;
    }
    /// Ends the stream after the frames published so far.
    void end() { detail::check(fastio_stream_end(h_)); }
    /// Fails the stream after the frames published so far: consumers get
    /// fastio::poisoned.
    void poison() { detail::check(fastio_stream_poison(h_)); }

    fastio_stream_producer *c_handle() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }

private:
    fastio_stream_producer *h_;
};

/// A received frame (`fastio_stream_frame`); its slot goes back to the
/// producer when every consumer has destroyed theirs.
class stream_frame {
public:
    explicit stream_frame(fastio_stream_frame *h) noexcept : h_(h) {}
    stream_frame(stream_frame &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    stream_frame &operator=(stream_frame &&o) noexcept {
        if (this != &o) {
            fastio_stream_frame_release(h_);
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    stream_frame(const stream_frame &) = delete;
    stream_frame &operator=(const stream_frame &) = delete;
    ~stream_frame() { fastio_stream_frame_release(h_); }

    std::string element_type() const {
        return detail::text([&](char *b, std::size_t n, std::size_t *len) {
            return fastio_stream_frame_element_type(h_, b, n, len);
        });
    }
    std::vector<std::size_t> shape() const {
        const std::size_t *s = nullptr;
        std::size_t n = 0;
        detail::check(fastio_stream_frame_shape(h_, &s, &n));
        return std::vector<std::size_t>(s, s + n);
    }
    /// The frame as elements of T, read-only.
    template <class T>
    view<const T> data() const {
        auto held = element_type();
        return detail::typed<const T>(raw().first, raw().second, shape(), held, "stream frame");
    }
    /// The frame's bytes, read-only.
    view<const std::byte> bytes() const {
        auto r = raw();
        return view<const std::byte>(static_cast<const std::byte *>(r.first), r.second, {r.second});
    }
    /// Its number in the stream.
    std::uint64_t seq() const {
        std::uint64_t s = 0;
        detail::check(fastio_stream_frame_seq(h_, &s, nullptr));
        return s;
    }
    /// Its source timestamp (ns since the Unix epoch).
    std::uint64_t timestamp_ns() const {
        std::uint64_t t = 0;
        detail::check(fastio_stream_frame_seq(h_, nullptr, &t));
        return t;
    }

    fastio_stream_frame *c_handle() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }

private:
    std::pair<const void *, std::size_t> raw() const {
        const void *p = nullptr;
        std::size_t n = 0;
        detail::check(fastio_stream_frame_bytes(h_, &p, &n));
        return {p, n};
    }
    fastio_stream_frame *h_;
};

/// A consumer of a stream (`fastio_stream_consumer`).
class stream_consumer {
public:
    explicit stream_consumer(fastio_stream_consumer *h) noexcept : h_(h) {}
    /// Attaches as consumer `index` (0 to consumers - 1) of stream `name`.
    static stream_consumer attach(context &ctx, const std::string &name, std::size_t index = 0) {
        fastio_stream_consumer *c = nullptr;
        detail::check(fastio_stream_consumer_attach(ctx.c_handle(), name.c_str(), index, &c));
        return stream_consumer(c);
    }
    stream_consumer(stream_consumer &&o) noexcept : h_(std::exchange(o.h_, nullptr)) {}
    stream_consumer &operator=(stream_consumer &&o) noexcept {
        if (this != &o) {
            fastio_stream_consumer_free(h_);
            h_ = std::exchange(o.h_, nullptr);
        }
        return *this;
    }
    stream_consumer(const stream_consumer &) = delete;
    stream_consumer &operator=(const stream_consumer &) = delete;
    ~stream_consumer() { fastio_stream_consumer_free(h_); }

    /// The next frame (waiting up to `limit`), or none after the last;
    /// throws fastio::poisoned when the producer failed, fastio::timeout.
    std::optional<stream_frame> next(std::chrono::milliseconds limit = forever) {
        fastio_stream_frame *f = nullptr;
        int rc = fastio_stream_next(h_, detail::millis(limit), &f);
        if (rc == FASTIO_END_OF_STREAM) return std::nullopt;
        detail::check(rc);
        return std::optional<stream_frame>(std::in_place, f);
    }
    /// Frames lost to drop-oldest so far.
    std::uint64_t dropped() const {
        std::uint64_t n = 0;
        detail::check(fastio_stream_dropped(h_, &n));
        return n;
    }

    /// `for (auto &f : consumer.frames())`: until the end of the stream;
    /// each frame is released when its iteration ends.
    class frames_range {
    public:
        class iterator {
        public:
            explicit iterator(stream_consumer *c) : c_(c) { current_ = c_->next(); }
            iterator() = default;
            stream_frame &operator*() { return *current_; }
            iterator &operator++() {
                current_.reset();
                current_ = c_->next();
                return *this;
            }
            bool operator!=(const iterator &o) const { return current_.has_value() != o.current_.has_value(); }

        private:
            stream_consumer *c_ = nullptr;
            std::optional<stream_frame> current_;
        };
        explicit frames_range(stream_consumer *c) : c_(c) {}
        iterator begin() { return iterator(c_); }
        iterator end() { return iterator(); }

    private:
        stream_consumer *c_;
    };
    frames_range frames() { return frames_range(this); }

    fastio_stream_consumer *c_handle() const noexcept { return h_; }
    explicit operator bool() const noexcept { return h_ != nullptr; }

private:
    fastio_stream_consumer *h_;
};

} // namespace fastio

#endif /* FASTIO_HPP */
