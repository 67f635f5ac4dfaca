// Every exception of the C++ API from a real bad call. Without
// FASTIO_OPERATOR: contexts, allocations and streams (run with a 16 MiB
// tmpfs on /dev/shm, so that a 64 MiB allocation finds no space). As an
// operator (input `v` int32, output `o` float32 [-1]): the entries.
#include "expect.hpp"

#include <chrono>
#include <cstdlib>
#include <iostream>
#include <type_traits>

using namespace std::chrono_literals;

static_assert(std::is_base_of_v<std::runtime_error, fastio::error>);
static_assert(std::is_base_of_v<fastio::error, fastio::no_space>);
static_assert(std::is_base_of_v<fastio::error, fastio::poisoned>);
static_assert(std::is_base_of_v<fastio::error, fastio::timeout>);
static_assert(!std::is_copy_constructible_v<fastio::context>);
static_assert(!std::is_copy_constructible_v<fastio::allocation>);
static_assert(!std::is_copy_constructible_v<fastio::mapping<float>>);
static_assert(!std::is_copy_constructible_v<fastio::op>);
static_assert(!std::is_copy_constructible_v<fastio::frame>);
static_assert(!std::is_copy_constructible_v<fastio::stream_producer>);
static_assert(!std::is_copy_constructible_v<fastio::stream_consumer>);
static_assert(!std::is_copy_constructible_v<fastio::stream_frame>);
static_assert(std::is_nothrow_move_constructible_v<fastio::context>);
static_assert(std::is_nothrow_move_constructible_v<fastio::stream_frame>);

static void contexts_and_allocations(fastio::context &ctx) {
    fastio::context none(nullptr);
    EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, none.handle(), "null");

    auto a = ctx.create_allocation(16);
    a.set_type<std::int32_t>({4});
    a.publish("ints");
    EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, a.map<float>(), "holds int32, not float32");
    EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, a.set_type<double>({4}), "32 bytes, but the allocation has 16");
    // what(): the status's text (not FASTIO_ERR_*), ": " and the message.
    try {
        (void)a.map<float>();
        FAIL("map<float>() of int32 did not throw");
    } catch (const fastio::error &e) {
        TRUE(std::string(e.what()) == "invalid argument: allocation holds int32, not float32");
        TRUE(std::string(e.what()) ==
             std::string(fastio_status_string(e.status())) + ": allocation holds int32, not float32");
    }
    try {
        (void)ctx.get("nobody");
        FAIL("get(\"nobody\") did not throw");
    } catch (const fastio::error &e) {
        const std::string what = e.what();
        TRUE(what.rfind("not found: ", 0) == 0 && what.find("nobody") != std::string::npos);
        TRUE(what.find("FASTIO_ERR") == std::string::npos);
    }
    {
        auto m = a.map_mut<std::int32_t>();  // the failed map left nothing mapped
        TRUE(m.size() == 4 && m.shape() == std::vector<std::size_t>{4});
        m[3] = 7;
    }
    {
        // A moved-from mapping is an empty view whose unmap() throws, as
        // any call on a moved-from owner does; so does a second unmap().
        auto m = a.map_mut<std::int32_t>();
        auto kept = std::move(m);
        TRUE(m.data() == nullptr && m.size() == 0 && m.shape().empty());
        TRUE(kept.size() == 4 && kept.data() != nullptr);
        EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, m.unmap(), "null");
        kept[0] = 5;
        kept.unmap();
        TRUE(kept.data() == nullptr && kept.size() == 0);
        EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, kept.unmap(), "null");
        auto from = a.map_mut<std::int32_t>();
        kept = std::move(from);  // move-assigned: `from` is left empty too
        TRUE(kept.size() == 4 && kept[0] == 5);
        TRUE(from.data() == nullptr && from.size() == 0 && from.shape().empty());
        EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, from.unmap(), "null");
    }
    auto b = ctx.get("ints");
    TRUE(b.element_type() == "int32");
    {
        auto r = b.map<std::int32_t>();
        TRUE(r.at({3}) == 7);
        try {
            (void)r.at({4});
            FAIL("at({4}) of 4 elements did not throw");
        } catch (const std::out_of_range &) {
        }
    }
    EXPECT_THROW(fastio::error, FASTIO_ERR_NOT_FOUND, ctx.get("nobody"), "nobody");
    EXPECT_THROW(fastio::timeout, FASTIO_ERR_TIMEOUT, ctx.wait_for("nobody", 30ms), "nobody");
    EXPECT_THROW(fastio::no_space, FASTIO_ERR_NO_SPACE, ctx.create_allocation(64u << 20),
                 "/dev/shm is full: 64.0 MiB asked");
    // Caught as what it derives from, too.
    try {
        ctx.create_allocation(64u << 20);
    } catch (const std::runtime_error &e) {
        TRUE(std::string(e.what()).find("shared memory (/dev/shm) is full") != std::string::npos);
    }
    b.free();
    EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, b.size(), "null");  // freed: gone

    auto moved = std::move(a);
    EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, a.size(), "null");
    TRUE(!a && moved && moved.size() == 16);
}

static void streams(fastio::context &ctx) {
    auto p = fastio::stream_producer::create<std::uint32_t>(ctx, "s", {4, 8}, 4, 1);
    auto c = fastio::stream_consumer::attach(ctx, "s", 0);
    TRUE(p.element_type() == "uint32");
    EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, p.begin<float>({2, 8}), "holds uint32, not float32");
    EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, p.begin<std::uint32_t>({5, 8}), "beyond");
    EXPECT_THROW(fastio::timeout, FASTIO_ERR_TIMEOUT, c.next(20ms), "");
    for (std::uint32_t k = 0; k < 3; ++k) {
        auto f = p.begin<std::uint32_t>({k + 1, 8});
        for (std::size_t i = 0; i < f.size(); ++i) f[i] = 100 * k + static_cast<std::uint32_t>(i);
        TRUE(p.publish() == k);
    }
    for (std::uint32_t k = 0; k < 3; ++k) {
        auto f = c.next();
        TRUE(f.has_value());
        if (!f) return;
        EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, f->data<std::int32_t>(), "holds uint32, not int32");
        auto d = f->data<std::uint32_t>();
        TRUE(f->seq() == k && d.shape() == (std::vector<std::size_t>{k + 1, 8}));
        for (std::size_t i = 0; i < d.size(); ++i) TRUE(d[i] == 100 * k + i);
        TRUE(f->bytes().size() == d.size_bytes());
        auto g = std::move(*f);
        EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, f->seq(), "null");
        TRUE(g.seq() == k);
    }
    p.poison();
    EXPECT_THROW(fastio::poisoned, FASTIO_ERR_POISONED, c.next(), "");

    // In a loop: the frames before the failure, then fastio::poisoned.
    auto p2 = fastio::stream_producer::create<float>(ctx, "t", {16}, 4, 1);
    auto c2 = fastio::stream_consumer::attach(ctx, "t", 0);
    for (int k = 0; k < 2; ++k) {
        p2.begin<float>({16})[0] = 1.5f * k;
        p2.publish();
    }
    p2.poison();
    int seen = 0;
    try {
        for (auto &f : c2.frames()) {
            TRUE(f.data<float>()[0] == 1.5f * seen);
            ++seen;
        }
        FAIL("the loop over a poisoned stream ended without an exception");
    } catch (const fastio::poisoned &e) {
        TRUE(seen == 2 && e.status() == FASTIO_ERR_POISONED);
    }

    // Ended: the loop ends, and next() gives no frame.
    auto p3 = fastio::stream_producer::create<std::uint8_t>(ctx, "u", {4}, 2, 1, fastio::overflow::block);
    auto c3 = fastio::stream_consumer::attach(ctx, "u", 0);
    p3.begin<std::uint8_t>({4});
    p3.publish();
    p3.end();
    seen = 0;
    for (auto &f : c3.frames()) seen += static_cast<int>(f.shape()[0]);
    TRUE(seen == 4 && !c3.next(10ms).has_value());

    auto moved = std::move(p3);
    EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, p3.publish(), "null");
    TRUE(c3.dropped() == 0);
}

static void entries() {
    auto op = fastio::op::from_env();
    EXPECT_THROW(fastio::error, FASTIO_ERR_NOT_FOUND, op.input("nope"), "nope");
    auto v = op.input("v");
    TRUE(v.is_input() && v.element_type() == "int32" && v.shape() == (std::vector<std::size_t>{2, 4}));
    EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, v.map<float>(), "holds int32, not float32");
    EXPECT_THROW(fastio::error, FASTIO_ERR_ACCESS, v.map_mut<std::int32_t>(), "read-only");
    {
        auto in = v.map<std::int32_t>();  // the failed calls mapped nothing
        TRUE(in.size() == 8 && in.at({1, 3}) == in[7]);
        auto kept = std::move(in);  // an entry's mapping, moved from
        TRUE(in.data() == nullptr && in.size() == 0 && kept.size() == 8);
        EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, in.unmap(), "null");
        kept.unmap();
        EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, kept.unmap(), "null");
    }
    auto o = op.output("o");
    TRUE(!o.is_input() && o.is_dynamic() && o.dynamic_indices() == std::vector<int>{0});
    EXPECT_THROW(fastio::error, FASTIO_ERR_SHAPE, o.map_mut<float>(), "set its dynamic dimensions with update_shape first");
    o.update_shape({{0, 3}});
    o.allocate();
    EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, o.map_mut<std::uint32_t>(), "holds float32, not uint32");
    {
        auto out = o.map_mut<float>();
        for (std::size_t i = 0; i < out.size(); ++i) out[i] = static_cast<float>(i) + 0.5f;
    }
    auto moved = std::move(op);
    EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, op.input("v"), "null");
    TRUE(moved.name() == "cpp-errors");
}

int main() {
    try {
        if (std::getenv("FASTIO_OPERATOR")) {
            entries();
        } else {
            auto ctx = fastio::context::create(1ull << 30);
            auto moved = std::move(ctx);
            EXPECT_THROW(fastio::error, FASTIO_ERR_INVALID_ARGUMENT, ctx.create_allocation(16), "null");
            contexts_and_allocations(moved);
            streams(moved);
        }
    } catch (const std::exception &e) {
        FAIL("unexpected exception: %s", e.what());
    }
    if (failures) {
        std::fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    std::cout << "c++ errors: " << (std::getenv("FASTIO_OPERATOR") ? "entries" : "contexts and streams")
              << " ok" << std::endl;
    return 0;
}
